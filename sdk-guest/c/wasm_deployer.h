/*
 * wasm_deployer.h -- write wasm-deployer plugins in C.
 *
 * The C twin of the Rust `sdk-guest` crate (and of sdk-guest/python). A plugin author never
 * touches WIT records: the helper parses the invocation, hands the plugin a small read-only
 * JSON view of the DeployItem, builds the WIT `response` / `deployer-error` records with every
 * field set, maps errors onto Landscaper codes and wraps the host imports (log, clock,
 * progress, kubernetes).
 *
 *     #include "wasm_deployer.h"
 *
 *     static bool echo_reconcile(const wd_invocation *inv, wd_response *resp, wd_error *err) {
 *         char *message;
 *         if (!wd_config_string(inv, "message", &message, err)) return false;  // ERR_CONFIGURATION_PROBLEM
 *         wd_log_info("echo %s", message);
 *         wd_response_phase(resp, "Succeeded");
 *         free(message);
 *         return true;
 *     }
 *     static bool echo_delete(const wd_invocation *inv, wd_response *resp, wd_error *err) {
 *         wd_response_phase(resp, "Succeeded");
 *         return true;
 *     }
 *     static const char *const TYPES[] = {"example.dev/echo", NULL};
 *     static const wd_deployer_info ECHO = {.name = "c-echo", .version = "0.1.0",
 *                                           .deploy_item_types = TYPES};
 *     WD_EXPORT_DEPLOYER(ECHO, echo_reconcile, echo_delete)
 *
 * HTTP: a deployer may call an API under its Target (type `wasm-deployer.dev/http-api`) with
 * wd_http_request over the standard `wasi:http/outgoing-handler`; the host checks the URL and
 * adds the credentials. See "HTTP requests" below and in docs/plugins/c.md.
 *
 * Build: plugins/c/build.sh (see docs/plugins/c.md). The bindings `wd_wit.h`/`wd_wit.c` are
 * generated per world by `c-componentize bindgen --rename-world wd_wit`; this helper is compiled
 * together with them, and only the parts the world has are compiled in (WD_HAVE_DEPLOYER,
 * WD_HAVE_HOOKS below).
 *
 * Conventions (read these once):
 * - Functions that can fail return `bool`: true = ok, false = `*err` was filled. A plugin
 *   usually just passes the error on: `if (!wd_k8s_get(..., err)) return false;`.
 * - There are no exceptions in C. The C analogue of "raise and let the helper report it" is
 *   `return wd_fail(err, "...")`: ERR_INTERNAL_PROBLEM, reason `PluginFailed`, logged at error
 *   level. A plugin that returns false without filling `*err` gets the same, with a generic
 *   message; one that returns true gets its response, whatever it left in `*err` is freed.
 * - Strings given to the helper are copied; strings the helper returns (`char *`, wd_doc) are
 *   malloc'd and the caller frees them (`free`, `wd_doc_free`). Everything in `wd_response` /
 *   `wd_error` is owned by the helper and freed after the call by the generated post-return
 *   code (toolchains.md section 7), so never free or keep pointers into them.
 * - A `wd_json` is a view into text owned by someone else (usually the invocation or a
 *   wd_doc): valid as long as that text lives.
 * - Every plugin instance serves one call (the host instantiates per invocation), so a leak
 *   costs nothing beyond that call; the helper frees what it allocates anyway.
 */
#ifndef WASM_DEPLOYER_H
#define WASM_DEPLOYER_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "wd_wit.h" /* generated: c-componentize bindgen --rename-world wd_wit */

/* Which world the bindings are for. The generated header has no "world" macro, so the helper
 * keys on enum macros that exist only in one world: `cluster.patch-type` is imported only by
 * the deployer worlds, `hooks.hook-type` is exported only by the hook worlds. */
#ifdef WASM_DEPLOYER_PLUGIN_CLUSTER_PATCH_TYPE_MERGE
#define WD_HAVE_DEPLOYER 1
#endif
#ifdef EXPORTS_WASM_DEPLOYER_PLUGIN_HOOKS_HOOK_TYPE_START
#define WD_HAVE_HOOKS 1
#endif
/* `wasi:http/outgoing-handler` is imported by the deployer worlds since WIT 1.5. */
#ifdef WASI_HTTP_TYPES_METHOD_GET
#define WD_HAVE_HTTP 1
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Landscaper error codes (sdk-guest/model/src/codes.rs) --------------------------------- */
#define WD_ERR_CONFIGURATION_PROBLEM "ERR_CONFIGURATION_PROBLEM"
#define WD_ERR_INTERNAL_PROBLEM "ERR_INTERNAL_PROBLEM"
#define WD_ERR_TIMEOUT "ERR_TIMEOUT"
#define WD_ERR_UNAUTHORIZED "ERR_UNAUTHORIZED"
#define WD_ERR_CYCLIC_DEPENDENCIES "ERR_CYCLIC_DEPENDENCIES"

/* The WIT records the plugin fills through the helpers below (owned by the helper). */
typedef wasm_deployer_plugin_types_response_t wd_response;
typedef wasm_deployer_plugin_types_deployer_error_t wd_error;
typedef wasm_deployer_plugin_types_condition_status_t wd_condition_status;
#define WD_CONDITION_TRUE WASM_DEPLOYER_PLUGIN_TYPES_CONDITION_STATUS_TRUE
#define WD_CONDITION_FALSE WASM_DEPLOYER_PLUGIN_TYPES_CONDITION_STATUS_FALSE
#define WD_CONDITION_UNKNOWN WASM_DEPLOYER_PLUGIN_TYPES_CONDITION_STATUS_UNKNOWN
#define WD_CONDITION_PROGRESSING WASM_DEPLOYER_PLUGIN_TYPES_CONDITION_STATUS_PROGRESSING

/* ==== JSON reader ============================================================================
 * Zero-copy and read-only: a `wd_json` is the exact span of one value inside a document that
 * was checked once, completely, by wd_doc_parse/wd_json_parse (RFC 8259 syntax, nesting depth
 * <= WD_JSON_MAX_DEPTH). Lookups walk the text again; they are linear, which is fine for
 * DeployItem-sized documents. Missing members give kind WD_JSON_MISSING, never NULL pointers. */
#define WD_JSON_MAX_DEPTH 64

typedef enum {
    WD_JSON_MISSING = 0, /* lookup found nothing (or the input was not a document) */
    WD_JSON_NULL,
    WD_JSON_BOOL,
    WD_JSON_NUMBER,
    WD_JSON_STRING,
    WD_JSON_ARRAY,
    WD_JSON_OBJECT,
} wd_json_kind;

typedef struct {
    wd_json_kind kind;
    const char *ptr; /* first byte of the value's text (NULL if MISSING) */
    size_t len;      /* length of the value's text */
} wd_json;

/* A document that owns its text (NUL-terminated). `root.kind == WD_JSON_MISSING` if absent. */
typedef struct {
    char *text;
    size_t len;
    wd_json root;
} wd_doc;

/* Check `text[0..len)` completely; the root value, or kind MISSING if it is not valid JSON. */
wd_json wd_json_parse(const char *text, size_t len);
/* Take ownership of malloc'd `text` (len bytes + NUL) and parse it. False if not valid JSON
 * (the doc then still owns the text, root MISSING). */
bool wd_doc_parse(wd_doc *doc, char *text, size_t len);
void wd_doc_free(wd_doc *doc);

/* Member `key` of an object (exact, unescaped key; may contain dots and slashes). */
wd_json wd_json_member(wd_json obj, const char *key);
/* Walk members by a dotted path, e.g. "spec.config.message" (segments up to 255 bytes). Use
 * wd_json_member for keys that contain dots (annotation and label keys). */
wd_json wd_json_path(wd_json v, const char *dotted_path);
/* Element `index` of an array. */
wd_json wd_json_index(wd_json arr, size_t index);
/* Iterate an object: `wd_json_next(&it, &key, &val)` until false (key is a WD_JSON_STRING). */
typedef struct {
    const char *p, *end;
} wd_json_iter;
wd_json_iter wd_json_members(wd_json obj);
bool wd_json_next(wd_json_iter *it, wd_json *key, wd_json *val);

/* Typed reads. wd_json_string: the unescaped string, malloc'd and NUL-terminated (NULL if `v`
 * is not a string or on OOM); `*len_out` (optional) gets its length ("\u0000" is kept, so use
 * it when that matters). wd_json_bool: false if `v` is not a bool. */
char *wd_json_string(wd_json v, size_t *len_out);
bool wd_json_bool(wd_json v, bool *out);
/* Whether `v` is a string equal to `s` (no allocation for plain strings). */
bool wd_json_string_eq(wd_json v, const char *s);
/* "string", "object", ... (for messages); "missing" for WD_JSON_MISSING. */
const char *wd_json_kind_name(wd_json_kind kind);

/* ==== JSON writer ============================================================================
 * Appends to a growing buffer and puts the commas in by itself. On OOM or misuse (nesting too
 * deep, a value where a key belongs) it stops writing and wd_jw_finish returns NULL. */
typedef struct {
    char *buf;
    size_t len, cap;
    bool failed;
    int depth;
    bool first[WD_JSON_MAX_DEPTH + 1];  /* per level: nothing written yet */
    bool object[WD_JSON_MAX_DEPTH + 1]; /* per level: an object (else an array) */
    bool after_key;                    /* a key was written; a value must follow */
} wd_jw;

void wd_jw_init(wd_jw *w);
void wd_jw_begin_object(wd_jw *w);
void wd_jw_end_object(wd_jw *w);
void wd_jw_begin_array(wd_jw *w);
void wd_jw_end_array(wd_jw *w);
void wd_jw_key(wd_jw *w, const char *key);
void wd_jw_string(wd_jw *w, const char *s);             /* escaped; NULL writes null */
void wd_jw_string_n(wd_jw *w, const char *s, size_t n); /* may contain NUL bytes */
void wd_jw_bool(wd_jw *w, bool b);
void wd_jw_int(wd_jw *w, int64_t i);
void wd_jw_null(wd_jw *w);
void wd_jw_value(wd_jw *w, wd_json v); /* copies an existing value's text (MISSING -> null) */
/* Shorthands for one member: key + value. */
void wd_jw_kv_string(wd_jw *w, const char *key, const char *s);
void wd_jw_kv_bool(wd_jw *w, const char *key, bool b);
/* The finished text (malloc'd, NUL-terminated; caller frees), or NULL if anything failed or a
 * container is still open. Resets the writer. */
char *wd_jw_finish(wd_jw *w);

/* A copy of object `obj` with member `key` set to the JSON text `value_json` (replaced where it
 * was, appended otherwise). Malloc'd; NULL if `obj` is not an object or on OOM. For updating
 * Kubernetes objects: `wd_json_with_member(existing.root, "data", "{\"k\":\"v\"}")`. */
char *wd_json_with_member(wd_json obj, const char *key, const char *value_json);

/* ==== Logging and clock (every world) ======================================================= */
typedef enum { WD_TRACE = 0, WD_DEBUG, WD_INFO, WD_WARN, WD_ERROR } wd_log_level;
void wd_log(wd_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define wd_log_debug(...) wd_log(WD_DEBUG, __VA_ARGS__)
#define wd_log_info(...) wd_log(WD_INFO, __VA_ARGS__)
#define wd_log_warn(...) wd_log(WD_WARN, __VA_ARGS__)
#define wd_log_error(...) wd_log(WD_ERROR, __VA_ARGS__)

uint64_t wd_now_unix_millis(void);
char *wd_now_rfc3339(void); /* malloc'd, e.g. "2026-01-01T00:00:00Z" */
uint64_t wd_monotonic_nanos(void);

/* ==== Errors =================================================================================
 * All of these fill `*err` (replacing what was there) and return false, so they can end a
 * function: `return wd_config_error(err, "spec.config.x: must be positive");`. `operation` is
 * left empty and filled by the helper with "reconcile" / "delete" / the hook type. */

/* code: one Landscaper code, or NULL for an error without code (the host retries it). */
bool wd_error_set(wd_error *err, const char *code, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* ERR_CONFIGURATION_PROBLEM, reason ParseProviderConfiguration. */
bool wd_config_error(wd_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* ERR_INTERNAL_PROBLEM, reason InternalProblem. */
bool wd_internal_error(wd_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The "uncaught exception" path: ERR_INTERNAL_PROBLEM, reason PluginFailed, and the message is
 * logged at error level. */
bool wd_fail(wd_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Free what `*err` holds and make it empty again (to recover from an error). */
void wd_error_clear(wd_error *err);
/* Whether `*err` carries `code`. */
bool wd_error_has_code(const wd_error *err, const char *code);

/* ==== Response ===============================================================================
 * The helper hands the plugin an empty response (phase/provider-status/exports/retry none,
 * conditions []); these set fields (copying the strings). JSON arguments must be valid JSON
 * text (e.g. from wd_jw_finish); provider status must carry apiVersion and kind. */
void wd_response_phase(wd_response *r, const char *phase);
void wd_response_provider_status(wd_response *r, const char *json);
void wd_response_exports(wd_response *r, const char *json);
void wd_response_retry_after_ms(wd_response *r, uint64_t ms);
void wd_response_add_condition(wd_response *r, const char *type, wd_condition_status status,
                               const char *reason, const char *message);
/* Attach a condition to an error (the host applies it even though the step failed). */
void wd_error_add_condition(wd_error *err, const char *type, wd_condition_status status,
                            const char *reason, const char *message);

/* ==== Deployer (worlds deployer-plugin, deployer-hook-plugin) ============================== */
#ifdef WD_HAVE_DEPLOYER

/* One reconcile/delete call, parsed. All strings are NUL-terminated and never NULL. */
typedef struct {
    const char *operation;     /* "reconcile" or "delete" */
    wd_doc item;               /* the DeployItem */
    wd_json config;            /* item spec.config (MISSING if absent) */
    const char *name;          /* metadata.name ("" if absent) */
    const char *namespace_;    /* metadata.namespace ("" if absent) */
    const char *type;          /* spec.type ("" if absent) */
    const char *phase;         /* status.phase ("" if absent) */
    wd_doc target;             /* the Target object (root MISSING if the item has none) */
    wd_doc target_content;     /* the resolved content (spec.config or the Secret data) */
    wd_doc context;            /* the Context object (root MISSING if none) */
    wd_doc previous_provider_status; /* status.providerStatus (root MISSING if none) */
} wd_invocation;

/* Required string `spec.config.<path>` (dotted): malloc'd copy in `*out`, or
 * ERR_CONFIGURATION_PROBLEM "spec.config.<path>: required string is missing" /
 * "...: expected a string, got <kind>". Also fails if spec.config itself is missing. */
bool wd_config_string(const wd_invocation *inv, const char *path, char **out, wd_error *err);
/* Optional bool `spec.config.<path>`: `dflt` if missing or null, error if another kind. */
bool wd_config_bool(const wd_invocation *inv, const char *path, bool dflt, bool *out,
                    wd_error *err);

/* Progress: false (+ ERR_TIMEOUT error) once the item's progressing timeout has passed. */
bool wd_checkpoint(const char *name, wd_error *err);
/* Milliseconds until the progressing timeout; false if it has passed. */
bool wd_remaining_millis(uint64_t *out);

/* Kubernetes on the item's Target cluster. Objects go in as JSON text and come back as wd_doc
 * (pass NULL for `out` if the answer is not needed). `namespace_` NULL or "" = cluster-scoped.
 * Host errors (with the host's codes, operation "kubernetes") are moved into `*err`. */
bool wd_k8s_get(const char *api_version, const char *kind, const char *namespace_,
                const char *name, bool *found, wd_doc *out, wd_error *err);
bool wd_k8s_create(const char *object_json, wd_doc *out, wd_error *err);
bool wd_k8s_update(const char *object_json, wd_doc *out, wd_error *err);
bool wd_k8s_delete(const char *api_version, const char *kind, const char *namespace_,
                   const char *name, bool *existed, wd_error *err);

typedef bool (*wd_step_fn)(const wd_invocation *inv, wd_response *resp, wd_error *err);

typedef struct {
    const char *name;
    const char *version;
    const char *const *deploy_item_types; /* NULL-terminated */
    const char *const *hook_types;        /* NULL-terminated or NULL (informational) */
} wd_deployer_info;

/* Glue behind WD_EXPORT_DEPLOYER; not for direct use. */
void wd__describe(const wd_deployer_info *info, wasm_deployer_plugin_types_description_t *ret);
bool wd__step(const char *operation, wd_step_fn fn, wasm_deployer_plugin_types_invocation_t *inv,
              wd_response *ret, wd_error *err);

/* Export the deployer: INFO is a wd_deployer_info, RECONCILE and DELETE are wd_step_fn.
 * Use once, at file scope. */
#define WD_EXPORT_DEPLOYER(INFO, RECONCILE, DELETE)                                              \
    void exports_wasm_deployer_plugin_deployer_describe(                                         \
        exports_wasm_deployer_plugin_deployer_description_t *ret) {                              \
        wd__describe(&(INFO), ret);                                                              \
    }                                                                                            \
    bool exports_wasm_deployer_plugin_deployer_reconcile(                                        \
        exports_wasm_deployer_plugin_deployer_invocation_t *inv,                                 \
        exports_wasm_deployer_plugin_deployer_response_t *ret,                                   \
        exports_wasm_deployer_plugin_deployer_deployer_error_t *err) {                           \
        return wd__step("reconcile", (RECONCILE), inv, ret, err);                                \
    }                                                                                            \
    bool exports_wasm_deployer_plugin_deployer_delete(                                           \
        exports_wasm_deployer_plugin_deployer_invocation_t *inv,                                 \
        exports_wasm_deployer_plugin_deployer_response_t *ret,                                   \
        exports_wasm_deployer_plugin_deployer_deployer_error_t *err) {                           \
        return wd__step("delete", (DELETE), inv, ret, err);                                      \
    }

#endif /* WD_HAVE_DEPLOYER */

/* ==== HTTP requests (wasi:http/outgoing-handler; worlds deployer-plugin, deployer-hook-plugin)
 * A blocking client over the standard WASI 0.2 interface plus the error mapping every SDK
 * shares. The host sends a request only if its URL lies under the item's Target `url` (type
 * `wasm-deployer.dev/http-api`, or a prefix its configuration allows), adds the Target's
 * credentials (`Authorization`) itself -- the plugin never sees a token -- and does not follow
 * redirects (a 3xx comes back as it is).
 *
 *     char *url;
 *     if (!wd_target_url(inv, "things/a", &url, err)) return false;   // <Target url>/things/a
 *     wd_http_response r;
 *     bool ok = wd_http_send_json("PUT", url, "{\"size\":3}", &r, err) &&  // transport errors
 *               wd_http_error_for_status("PUT", url, &r, err);              // 4xx/5xx
 *     if (ok) wd_log_info("PUT %s: %u", url, (unsigned)r.status);
 *     wd_http_response_free(&r);
 *     free(url);
 *     return ok;
 *
 * Error mapping (wd_http_status_error, wd_http_transport_error):
 * - 401, 403: ERR_UNAUTHORIZED, reason `Unauthorized`;
 * - other 4xx: ERR_CONFIGURATION_PROBLEM, reason `HttpClientError`;
 * - 5xx: no code (retried), reason `HttpServerError`;
 *   (all three: message "<METHOD> <URL>: <status> <body, first 500 characters>")
 * - no response (refused, timeout, reset, TLS, ...): no code (retried), reason
 *   `HttpRequestFailed`, message "<METHOD> <URL>: wasi:http error <code> (<detail>)";
 * - refused by the host (`HTTP-request-denied`): ERR_CONFIGURATION_PROBLEM, reason
 *   `HttpNotAllowed` (the host fails the item so anyway). */
#define WD_HTTP_API_TARGET_TYPE "wasm-deployer.dev/http-api"
#define WD_HTTP_BODY_IN_MESSAGE 500 /* characters of a response body an error message quotes */
#define WD_HTTP_REQUEST_DENIED "HTTP-request-denied"

typedef struct {
    const char *name;
    const char *value;
} wd_http_header;

/* A response, whatever its status. Everything is malloc'd: wd_http_response_free. */
typedef struct {
    uint16_t status;
    wd_http_header *headers; /* names lower case, in order */
    size_t n_headers;
    char *body;              /* NUL-terminated ("" if empty; may contain NUL bytes) */
    size_t body_len;
} wd_http_response;

void wd_http_response_free(wd_http_response *r);
/* The first value of header `name` (case-insensitive), or NULL. */
const char *wd_http_response_header(const wd_http_response *r, const char *name);
/* The body as JSON (a view into r->body): MISSING if empty or not JSON. */
wd_json wd_http_response_json(const wd_http_response *r);
/* 2xx. */
bool wd_http_is_success(const wd_http_response *r);

/* The mapped error for a 4xx or 5xx status (see above; false and `*err` filled), true for any
 * other status. `method` and `url` name the request in the message. */
bool wd_http_status_error(const char *method, const char *url, uint16_t status, const void *body,
                          size_t body_len, wd_error *err);
/* wd_http_status_error for a response: `if (!wd_http_error_for_status("PUT", url, &r, err))`. */
bool wd_http_error_for_status(const char *method, const char *url, const wd_http_response *r,
                              wd_error *err);
/* The mapped error for a request that got no response: `code` is the wasi:http error-code case
 * in its WIT spelling (e.g. "connection-refused"), `detail` its payload or NULL. Always false.
 * wd_http_request calls it itself; it is public for plugins with their own client. */
bool wd_http_transport_error(const char *method, const char *url, const char *code,
                             const char *detail, wd_error *err);

/* `base` and a relative `path` joined with exactly one '/' ("https://h/v1" or "https://h/v1/"
 * with "things/a" or "/things/a": "https://h/v1/things/a"); an empty path gives `base`.
 * Malloc'd; NULL on OOM. */
char *wd_http_join(const char *base, const char *path);
/* Whether `path` may be joined to a base URL: not an absolute URL ("https://...", "//host"),
 * no ".." segment (also percent-encoded). Else ERR_CONFIGURATION_PROBLEM, reason InvalidPath. */
bool wd_http_check_path(const char *path, wd_error *err);

#ifdef WD_HAVE_DEPLOYER
/* `spec.config.url` of the item's Target joined with `path` (checked by wd_http_check_path;
 * NULL or "" = the url itself), malloc'd in `*out`. ERR_CONFIGURATION_PROBLEM if the item has
 * no Target (reason NoTarget), it is not of type WD_HTTP_API_TARGET_TYPE (TargetType), or has
 * no http(s) url (TargetUrl). */
bool wd_target_url(const wd_invocation *inv, const char *path, char **out, wd_error *err);
#endif

#ifdef WD_HAVE_HTTP
/* Send one request and wait for the whole response. True with `*out` filled for ANY status
 * (check it with wd_http_error_for_status); false with the mapped transport error in `*err`
 * (`*out` is then empty, and freeing it is harmless). `url` is absolute (http/https; a
 * fragment is dropped); `headers` may be NULL; `body` NULL/0 sends none. A Content-Length is
 * added for a body and for PUT, POST and PATCH. Without options the host's timeouts apply,
 * always cut to the invocation's deadline. */
bool wd_http_request(const char *method, const char *url, const wd_http_header *headers,
                     size_t n_headers, const void *body, size_t body_len, wd_http_response *out,
                     wd_error *err);
/* wd_http_request with the JSON text `json` (NULL: no body) and `Content-Type` and `Accept:
 * application/json`. */
bool wd_http_send_json(const char *method, const char *url, const char *json,
                       wd_http_response *out, wd_error *err);
#endif /* WD_HAVE_HTTP */

/* ==== Hooks (worlds hook-plugin, deployer-hook-plugin) ===================================== */
#ifdef WD_HAVE_HOOKS

typedef exports_wasm_deployer_plugin_hooks_hook_type_t wd_hook_type;
#define WD_HOOK_START EXPORTS_WASM_DEPLOYER_PLUGIN_HOOKS_HOOK_TYPE_START
#define WD_HOOK_DURING_RESPONSIBILITY_CHECK                                                      \
    EXPORTS_WASM_DEPLOYER_PLUGIN_HOOKS_HOOK_TYPE_DURING_RESPONSIBILITY_CHECK
#define WD_HOOK_AFTER_RESPONSIBILITY_CHECK                                                       \
    EXPORTS_WASM_DEPLOYER_PLUGIN_HOOKS_HOOK_TYPE_AFTER_RESPONSIBILITY_CHECK
#define WD_HOOK_SHOULD_RECONCILE EXPORTS_WASM_DEPLOYER_PLUGIN_HOOKS_HOOK_TYPE_SHOULD_RECONCILE
#define WD_HOOK_BEFORE_ANY_RECONCILE                                                             \
    EXPORTS_WASM_DEPLOYER_PLUGIN_HOOKS_HOOK_TYPE_BEFORE_ANY_RECONCILE
#define WD_HOOK_BEFORE_ABORT EXPORTS_WASM_DEPLOYER_PLUGIN_HOOKS_HOOK_TYPE_BEFORE_ABORT
#define WD_HOOK_BEFORE_FORCE_RECONCILE                                                           \
    EXPORTS_WASM_DEPLOYER_PLUGIN_HOOKS_HOOK_TYPE_BEFORE_FORCE_RECONCILE
#define WD_HOOK_BEFORE_DELETE EXPORTS_WASM_DEPLOYER_PLUGIN_HOOKS_HOOK_TYPE_BEFORE_DELETE
#define WD_HOOK_BEFORE_RECONCILE EXPORTS_WASM_DEPLOYER_PLUGIN_HOOKS_HOOK_TYPE_BEFORE_RECONCILE
#define WD_HOOK_END EXPORTS_WASM_DEPLOYER_PLUGIN_HOOKS_HOOK_TYPE_END

/* The WIT name of a hook type ("before-reconcile", ...). */
const char *wd_hook_type_name(wd_hook_type t);

/* One hook call, parsed. Strings are NUL-terminated and never NULL. */
typedef struct {
    wd_hook_type hook_type;
    wd_doc item;             /* the DeployItem (root MISSING for `start`) */
    wd_doc target;           /* its Target object (root MISSING if none) */
    const char *name;        /* item metadata.name ("" if absent) */
    const char *namespace_;  /* item metadata.namespace ("" if absent) */
    wd_json annotations;     /* item metadata.annotations (MISSING if absent) */
} wd_hook_input;

/* What the hook answers. `some == false` (the default) means "no opinion" (WIT none). */
typedef struct {
    bool some;
    bool abort_reconcile;
    bool requeue; /* "requeue now": true makes the host loop; prefer requeue_after_ms */
    bool has_requeue_after_ms;
    uint64_t requeue_after_ms;
} wd_hook_result;

typedef bool (*wd_hook_fn)(const wd_hook_input *in, wd_hook_result *result, wd_error *err);

typedef struct {
    const char *name;
    const char *version;
    const wd_hook_type *hook_types;
    size_t hook_types_len;
} wd_hook_info;

/* Glue behind WD_EXPORT_HOOKS; not for direct use. */
void wd__hooks_describe(const wd_hook_info *info,
                        exports_wasm_deployer_plugin_hooks_hook_setup_t *ret);
bool wd__hooks_run(wd_hook_fn fn, exports_wasm_deployer_plugin_hooks_hook_input_t *in,
                   exports_wasm_deployer_plugin_hooks_option_hook_result_t *ret, wd_error *err);

/* Export the hooks: INFO is a wd_hook_info, RUN a wd_hook_fn. Use once, at file scope. */
#define WD_EXPORT_HOOKS(INFO, RUN)                                                               \
    void exports_wasm_deployer_plugin_hooks_describe(                                            \
        exports_wasm_deployer_plugin_hooks_hook_setup_t *ret) {                                  \
        wd__hooks_describe(&(INFO), ret);                                                        \
    }                                                                                            \
    bool exports_wasm_deployer_plugin_hooks_run(                                                 \
        exports_wasm_deployer_plugin_hooks_hook_input_t *in,                                     \
        exports_wasm_deployer_plugin_hooks_option_hook_result_t *ret,                            \
        exports_wasm_deployer_plugin_hooks_deployer_error_t *err) {                              \
        return wd__hooks_run((RUN), in, ret, err);                                               \
    }

#endif /* WD_HAVE_HOOKS */

#ifdef __cplusplus
}
#endif
#endif /* WASM_DEPLOYER_H */
