/*
 * c-hold-hook: the example hook plugin in C (world `hook-plugin`).
 *
 * Holds DeployItems annotated `examples.wasm-deployer.dev/hold: "true"` before their reconcile
 * and asks the host to look again after a second. Build: `plugins/c/build.sh OUT_DIR`.
 */
#include "wasm_deployer.h"

/* The key contains dots: look it up with wd_json_member, not with a dotted path. */
#define HOLD_ANNOTATION "examples.wasm-deployer.dev/hold"

static bool hold_run(const wd_hook_input *in, wd_hook_result *result, wd_error *err) {
    (void)err;
    if (!wd_json_string_eq(wd_json_member(in->annotations, HOLD_ANNOTATION), "true"))
        return true; /* result->some stays false: no opinion */
    wd_log_info("holding %s", in->name);
    /* requeue false + requeue-after-ms: look again in a second (requeue true would mean
     * "requeue now", a busy loop in this host). */
    result->some = true;
    result->abort_reconcile = true;
    result->requeue = false;
    result->has_requeue_after_ms = true;
    result->requeue_after_ms = 1000;
    return true;
}

static const wd_hook_type HOOK_TYPES[] = {WD_HOOK_BEFORE_RECONCILE};
static const wd_hook_info HOLD = {
    .name = "c-hold-hook",
    .version = "0.1.0",
    .hook_types = HOOK_TYPES,
    .hook_types_len = sizeof HOOK_TYPES / sizeof HOOK_TYPES[0],
};

WD_EXPORT_HOOKS(HOLD, hold_run)
