/*
 * c-http-api: a deployer that drives an HTTP API under its Target (C, world deployer-plugin).
 *
 * With a Target of type `wasm-deployer.dev/http-api` (`spec.config.url`) and a DeployItem
 * `spec.config = {"path": "things/a", "body": {...any JSON...}}`:
 * - reconcile: `PUT <url>/<path>` with `body` as JSON; 2xx -> phase `Succeeded`, exports
 *   `{"status": <code>, "body": <the JSON answer, or null>}`;
 * - delete: `DELETE <url>/<path>`; 2xx or 404 -> done (empty response).
 * Other answers follow the helper's mapping (wasm_deployer.h, "HTTP requests"): 401/403
 * ERR_UNAUTHORIZED, other 4xx ERR_CONFIGURATION_PROBLEM, 5xx and transport failures retried,
 * a URL outside the Target ERR_CONFIGURATION_PROBLEM (HttpNotAllowed). The host sends only
 * under the Target's url and adds its credentials; this plugin never sees them.
 *
 * Build: plugins/c/build.sh OUT_DIR (-> OUT_DIR/c-http-api.wasm). Run: examples/item.yaml.
 */
#include <stdlib.h>
#include <string.h>

#include "wasm_deployer.h"

/* The request URL (`<Target url>/<spec.config.path>`) and, if `body` is not NULL, the JSON
 * text of `spec.config.body` (null if absent). Both malloc'd. */
static bool request_of(const wd_invocation *inv, char **url, char **body, wd_error *err) {
    char *path = NULL;
    *url = NULL;
    if (body) *body = NULL;
    if (!wd_config_string(inv, "path", &path, err)) return false; /* missing / not a string */
    if (!*path) {
        free(path);
        return wd_config_error(err, "spec.config.path: must not be empty (the API path under "
                                    "the Target's url)");
    }
    bool ok = wd_target_url(inv, path, url, err); /* relative, no "..", Target http-api + url */
    free(path);
    if (!ok || !body) return ok;
    wd_jw w;
    wd_jw_init(&w);
    wd_jw_value(&w, wd_json_member(inv->config, "body"));
    if (!(*body = wd_jw_finish(&w))) {
        free(*url);
        *url = NULL;
        return wd_internal_error(err, "out of memory");
    }
    return true;
}

/* A 3xx is not followed (the host does not either): the Target should name the final URL. */
static bool redirect_error(const char *method, const char *url, const wd_http_response *r,
                           wd_error *err) {
    const char *location = wd_http_response_header(r, "location");
    return wd_error_set(err, WD_ERR_CONFIGURATION_PROBLEM, "HttpRedirect",
                        "%s %s: %u redirect to \"%s\" (not followed: point the Target's url at "
                        "the final location)",
                        method, url, (unsigned)r->status, location ? location : "");
}

static bool api_reconcile(const wd_invocation *inv, wd_response *resp, wd_error *err) {
    char *url, *body, *exports = NULL;
    if (!request_of(inv, &url, &body, err)) return false;
    wd_log_info("PUT %s", url);
    wd_http_response r;
    bool ok = wd_http_send_json("PUT", url, body, &r, err) && /* transport errors mapped */
              wd_http_error_for_status("PUT", url, &r, err);  /* 4xx / 5xx mapped */
    if (ok && !wd_http_is_success(&r)) ok = redirect_error("PUT", url, &r, err);
    if (ok) {
        wd_jw w;
        wd_jw_init(&w);
        wd_jw_begin_object(&w);
        wd_jw_key(&w, "status");
        wd_jw_int(&w, r.status);
        wd_jw_key(&w, "body");
        wd_jw_value(&w, wd_http_response_json(&r)); /* null if empty or not JSON */
        wd_jw_end_object(&w);
        if (!(exports = wd_jw_finish(&w))) ok = wd_internal_error(err, "out of memory");
    }
    if (ok) {
        wd_log_info("PUT %s: %u", url, (unsigned)r.status);
        wd_response_phase(resp, "Succeeded");
        wd_response_exports(resp, exports);
    }
    free(exports);
    wd_http_response_free(&r);
    free(body);
    free(url);
    return ok;
}

static bool api_delete(const wd_invocation *inv, wd_response *resp, wd_error *err) {
    char *url;
    if (!request_of(inv, &url, NULL, err)) return false;
    wd_log_info("DELETE %s", url);
    wd_http_response r;
    bool ok = wd_http_request("DELETE", url, NULL, 0, NULL, 0, &r, err);
    if (ok) {
        if (r.status == 404) wd_log_info("%s was already gone", url);
        else if (!wd_http_error_for_status("DELETE", url, &r, err)) ok = false;
        else if (!wd_http_is_success(&r)) ok = redirect_error("DELETE", url, &r, err);
    }
    wd_http_response_free(&r);
    free(url);
    return ok; /* done: the response stays empty */
}

static const char *const DEPLOY_ITEM_TYPES[] = {"example.wasm-deployer.dev/c-http-api", NULL};
static const wd_deployer_info HTTP_API = {
    .name = "c-http-api",
    .version = "0.1.0",
    .deploy_item_types = DEPLOY_ITEM_TYPES,
};

WD_EXPORT_DEPLOYER(HTTP_API, api_reconcile, api_delete)
