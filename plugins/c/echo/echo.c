/*
 * c-echo: the example deployer plugin in C (world `deployer-plugin`).
 *
 * Writes the provider configuration's `message` into a ConfigMap `<item>-echo` next to the
 * DeployItem and exports it. `crash: true` takes the helper's failure path (C has no
 * exceptions): ERR_INTERNAL_PROBLEM "crash requested". Build: `plugins/c/build.sh OUT_DIR`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wasm_deployer.h"

#define API_VERSION "examples.wasm-deployer.dev/v1"

/* `<item>-echo`, malloc'd. */
static char *config_map_name(const wd_invocation *inv) {
    size_t n = snprintf(NULL, 0, "%s-echo", inv->name) + 1;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s-echo", inv->name);
    return s;
}

/* {"message": <message>} -- the ConfigMap data and the export. */
static char *message_object(const char *message) {
    wd_jw w;
    wd_jw_init(&w);
    wd_jw_begin_object(&w);
    wd_jw_kv_string(&w, "message", message);
    wd_jw_end_object(&w);
    return wd_jw_finish(&w);
}

/* Create the ConfigMap, or update the data of the one that exists. */
static bool apply_config_map(const char *name, const char *ns, const char *data, wd_error *err) {
    bool found, ok;
    wd_doc existing;
    if (!wd_k8s_get("v1", "ConfigMap", ns, name, &found, &existing, err)) return false;
    if (found) {
        char *updated = wd_json_with_member(existing.root, "data", data);
        wd_doc_free(&existing);
        if (!updated) return wd_internal_error(err, "building the updated ConfigMap failed");
        ok = wd_k8s_update(updated, NULL, err);
        free(updated);
        return ok;
    }
    wd_jw w;
    wd_jw_init(&w);
    wd_jw_begin_object(&w);
    wd_jw_kv_string(&w, "apiVersion", "v1");
    wd_jw_kv_string(&w, "kind", "ConfigMap");
    wd_jw_key(&w, "metadata");
    wd_jw_begin_object(&w);
    wd_jw_kv_string(&w, "name", name);
    wd_jw_kv_string(&w, "namespace", ns);
    wd_jw_end_object(&w);
    wd_jw_key(&w, "data");
    wd_jw_value(&w, wd_json_parse(data, strlen(data)));
    wd_jw_end_object(&w);
    char *object = wd_jw_finish(&w);
    if (!object) return wd_internal_error(err, "building the ConfigMap failed");
    ok = wd_k8s_create(object, NULL, err);
    free(object);
    return ok;
}

static bool echo_reconcile(const wd_invocation *inv, wd_response *resp, wd_error *err) {
    char *message = NULL, *name = NULL, *data = NULL, *status = NULL;
    bool crash, ok = false;

    /* ERR_CONFIGURATION_PROBLEM naming the field if missing or of the wrong type. */
    if (!wd_config_string(inv, "message", &message, err)) goto out;
    if (!wd_config_bool(inv, "crash", false, &crash, err)) goto out;
    if (crash) {
        /* The C stand-in for an uncaught exception: ERR_INTERNAL_PROBLEM, logged. */
        wd_fail(err, "crash requested");
        goto out;
    }

    name = config_map_name(inv);
    data = message_object(message);
    if (!name || !data) {
        wd_internal_error(err, "out of memory");
        goto out;
    }
    wd_log_info("echo: writing \"%s\" into ConfigMap %s/%s", message, inv->namespace_, name);
    if (!apply_config_map(name, inv->namespace_, data, err)) goto out;

    wd_jw w;
    wd_jw_init(&w);
    wd_jw_begin_object(&w);
    wd_jw_kv_string(&w, "apiVersion", API_VERSION);
    wd_jw_kv_string(&w, "kind", "ProviderStatus");
    wd_jw_kv_string(&w, "configMap", name);
    wd_jw_end_object(&w);
    status = wd_jw_finish(&w);
    if (!status) {
        wd_internal_error(err, "out of memory");
        goto out;
    }
    wd_response_phase(resp, "Succeeded");
    wd_response_provider_status(resp, status);
    wd_response_exports(resp, data);
    ok = true;
out:
    free(message);
    free(name);
    free(data);
    free(status);
    return ok;
}

static bool echo_delete(const wd_invocation *inv, wd_response *resp, wd_error *err) {
    char *name = config_map_name(inv);
    bool existed;
    if (!name) return wd_internal_error(err, "out of memory");
    bool ok = wd_k8s_delete("v1", "ConfigMap", inv->namespace_, name, &existed, err);
    if (ok) {
        wd_log_info("echo: ConfigMap %s/%s %s", inv->namespace_, name,
                    existed ? "deleted" : "was already gone");
        wd_response_phase(resp, "Succeeded");
    }
    free(name);
    return ok;
}

static const char *const DEPLOY_ITEM_TYPES[] = {"examples.wasm-deployer.dev/echo-c", NULL};
static const wd_deployer_info ECHO = {
    .name = "c-echo",
    .version = "0.1.0",
    .deploy_item_types = DEPLOY_ITEM_TYPES,
    .hook_types = NULL,
};

WD_EXPORT_DEPLOYER(ECHO, echo_reconcile, echo_delete)
