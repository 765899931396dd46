/*
 * Native unit test of the helper's HTTP part under AddressSanitizer/UBSan: the URL helpers, the
 * error mapping, wd_target_url, and the wasi:http client against a fake host (the wasi:http
 * imports are defined below, with a resource table that checks every handle is dropped once,
 * children before parents, as wasmtime insists). No wasm:
 *
 *   target/debug/c-componentize bindgen --wit wit --world deployer-plugin --out /tmp/wd-gen --rename-world wd_wit
 *   clang -std=c11 -g -fsanitize=address,undefined -no-pie -I /tmp/wd-gen -I sdk-guest/c \
 *       -Wl,--unresolved-symbols=ignore-all -o /tmp/http_test sdk-guest/c/tests/http_test.c && /tmp/http_test
 *
 * The generated wd_wit.c is not linked: the few generated functions the helper calls (the
 * *_free ones) are re-implemented here for the cases the test produces.
 */
#include "../wasm_deployer.c"

#include <assert.h>
#include <stdio.h>

/* ==== fakes of generated free functions =================================================== */

static void str_free(wd_wit_string_t *s) {
    if (s->len) free(s->ptr);
    s->ptr = NULL;
    s->len = 0;
}

void wasm_deployer_plugin_types_deployer_error_free(wasm_deployer_plugin_types_deployer_error_t *e) {
    for (size_t i = 0; i < e->codes.len; i++) str_free(&e->codes.ptr[i]);
    if (e->codes.len) free(e->codes.ptr);
    str_free(&e->operation);
    str_free(&e->reason);
    str_free(&e->message);
    assert(e->conditions.len == 0); /* the test adds none */
}

void wasi_http_types_error_code_free(wasi_http_types_error_code_t *c) {
    if (c->tag == WASI_HTTP_TYPES_ERROR_CODE_INTERNAL_ERROR && c->val.internal_error.is_some)
        str_free(&c->val.internal_error.val);
    if (c->tag == WASI_HTTP_TYPES_ERROR_CODE_DNS_ERROR && c->val.dns_error.rcode.is_some)
        str_free(&c->val.dns_error.rcode.val);
}

void wasi_http_types_list_tuple2_field_name_field_value_free(
    wasi_http_types_list_tuple2_field_name_field_value_t *l) {
    for (size_t i = 0; i < l->len; i++) {
        str_free(&l->ptr[i].f0);
        if (l->ptr[i].f1.len) free(l->ptr[i].f1.ptr);
    }
    if (l->len) free(l->ptr);
}

/* ==== fake host =========================================================================== */

enum { R_FIELDS = 1, R_OREQ, R_OBODY, R_FUTURE, R_POLL, R_OSTREAM, R_IRESP, R_HEADERS, R_IBODY,
       R_ISTREAM, R_TRAILERS, R_IOERR };
typedef struct {
    int kind, parent;
    bool live;
} resource;
static resource res[256];
static int n_res = 1;

static int res_new(int kind, int parent) {
    assert(n_res < 256);
    res[n_res] = (resource){kind, parent, true};
    return n_res++;
}
static void res_drop(int h, int kind) {
    assert(h > 0 && h < n_res && res[h].live && res[h].kind == kind);
    for (int i = 1; i < n_res; i++) assert(!(res[i].live && res[i].parent == h)); /* children first */
    res[h].live = false;
}
static void res_check(int h, int kind) { assert(h > 0 && h < n_res && res[h].live && res[h].kind == kind); }
static void all_dropped(void) {
    for (int i = 1; i < n_res; i++) assert(!res[i].live);
    n_res = 1;
}

/* Host-allocated memory is malloc'd like cabi_realloc; an empty list is (void *)1. */
static uint8_t *host_bytes(const void *s, size_t n) {
    if (!n) return (uint8_t *)1;
    uint8_t *p = malloc(n);
    memcpy(p, s, n);
    return p;
}

static struct {
    /* behaviour */
    int handle_error, future_error, write_error; /* -1: none */
    bool header_error;
    uint16_t status;
    const char *resp_headers[4][2];
    const char *resp_body;
    size_t resp_body_len, served, read_chunk;
    bool body_error;
    /* what the plugin sent */
    int method_tag, scheme_tag, oreq, obody;
    char method_other[16], authority[64], path[256], headers[512];
    sbuf sent;
    bool finished;
} S;

static void scenario(void) {
    free(S.sent.p);
    memset(&S, 0, sizeof S);
    S.handle_error = S.future_error = S.write_error = -1;
    S.status = 200;
    S.read_chunk = 5;
}

static void copy_wstr(char *dst, size_t cap, const wd_wit_string_t *s) {
    assert(s->len < cap);
    memcpy(dst, s->ptr, s->len);
    dst[s->len] = '\0';
}

static void make_code(wasi_http_types_error_code_t *c, int tag) {
    memset(c, 0, sizeof *c);
    c->tag = (uint8_t)tag;
    if (tag == WASI_HTTP_TYPES_ERROR_CODE_INTERNAL_ERROR) {
        c->val.internal_error.is_some = true;
        c->val.internal_error.val = (wd_wit_string_t){host_bytes("boom", 4), 4};
    }
    if (tag == WASI_HTTP_TYPES_ERROR_CODE_DNS_ERROR) {
        c->val.dns_error.rcode.is_some = true;
        c->val.dns_error.rcode.val = (wd_wit_string_t){host_bytes("NXDOMAIN", 8), 8};
        c->val.dns_error.info_code = (wd_wit_option_u16_t){true, 3};
    }
}

bool wasi_http_types_static_fields_from_list(wasi_http_types_list_tuple2_field_name_field_value_t *l,
                                             wasi_http_types_own_fields_t *ret,
                                             wasi_http_types_header_error_t *err) {
    if (S.header_error) {
        err->tag = WASI_HTTP_TYPES_HEADER_ERROR_FORBIDDEN;
        return false;
    }
    for (size_t i = 0; i < l->len; i++) {
        size_t n = strlen(S.headers);
        snprintf(S.headers + n, sizeof S.headers - n, "%.*s: %.*s\n", (int)l->ptr[i].f0.len,
                 (char *)l->ptr[i].f0.ptr, (int)l->ptr[i].f1.len, (char *)l->ptr[i].f1.ptr);
    }
    ret->__handle = res_new(R_FIELDS, 0);
    return true;
}
wasi_http_types_own_outgoing_request_t wasi_http_types_constructor_outgoing_request(wasi_http_types_own_headers_t h) {
    res_drop(h.__handle, R_FIELDS); /* moved into the request */
    return (wasi_http_types_own_outgoing_request_t){S.oreq = res_new(R_OREQ, 0)};
}
wasi_http_types_borrow_outgoing_request_t wasi_http_types_borrow_outgoing_request(wasi_http_types_own_outgoing_request_t h) {
    return (wasi_http_types_borrow_outgoing_request_t){h.__handle};
}
bool wasi_http_types_method_outgoing_request_set_method(wasi_http_types_borrow_outgoing_request_t self, wasi_http_types_method_t *m) {
    res_check(self.__handle, R_OREQ);
    S.method_tag = m->tag;
    if (m->tag == WASI_HTTP_TYPES_METHOD_OTHER) copy_wstr(S.method_other, sizeof S.method_other, &m->val.other);
    return true;
}
bool wasi_http_types_method_outgoing_request_set_scheme(wasi_http_types_borrow_outgoing_request_t self, wasi_http_types_scheme_t *s) {
    res_check(self.__handle, R_OREQ);
    assert(s);
    S.scheme_tag = s->tag;
    return true;
}
bool wasi_http_types_method_outgoing_request_set_authority(wasi_http_types_borrow_outgoing_request_t self, wd_wit_string_t *a) {
    res_check(self.__handle, R_OREQ);
    copy_wstr(S.authority, sizeof S.authority, a);
    return true;
}
bool wasi_http_types_method_outgoing_request_set_path_with_query(wasi_http_types_borrow_outgoing_request_t self, wd_wit_string_t *p) {
    res_check(self.__handle, R_OREQ);
    copy_wstr(S.path, sizeof S.path, p);
    return true;
}
bool wasi_http_types_method_outgoing_request_body(wasi_http_types_borrow_outgoing_request_t self, wasi_http_types_own_outgoing_body_t *ret) {
    res_check(self.__handle, R_OREQ);
    ret->__handle = S.obody = res_new(R_OBODY, 0);
    return true;
}
void wasi_http_types_outgoing_request_drop_own(wasi_http_types_own_outgoing_request_t h) { res_drop(h.__handle, R_OREQ); }
bool wasi_http_outgoing_handler_handle(wasi_http_types_own_outgoing_request_t req,
                                       wasi_http_types_own_request_options_t *options,
                                       wasi_http_types_own_future_incoming_response_t *ret,
                                       wasi_http_types_error_code_t *err) {
    assert(!options);
    res_drop(req.__handle, R_OREQ); /* consumed, also on error */
    if (S.handle_error >= 0) {
        make_code(err, S.handle_error);
        return false;
    }
    ret->__handle = res_new(R_FUTURE, 0);
    return true;
}
wasi_http_types_borrow_outgoing_body_t wasi_http_types_borrow_outgoing_body(wasi_http_types_own_outgoing_body_t h) {
    return (wasi_http_types_borrow_outgoing_body_t){h.__handle};
}
bool wasi_http_types_method_outgoing_body_write(wasi_http_types_borrow_outgoing_body_t self, wasi_http_types_own_output_stream_t *ret) {
    res_check(self.__handle, R_OBODY);
    ret->__handle = res_new(R_OSTREAM, self.__handle);
    return true;
}
wasi_io_streams_borrow_output_stream_t wasi_io_streams_borrow_output_stream(wasi_io_streams_own_output_stream_t h) {
    return (wasi_io_streams_borrow_output_stream_t){h.__handle};
}
bool wasi_io_streams_method_output_stream_blocking_write_and_flush(wasi_io_streams_borrow_output_stream_t self, wd_wit_list_u8_t *c, wasi_io_streams_stream_error_t *err) {
    res_check(self.__handle, R_OSTREAM);
    assert(c->len > 0 && c->len <= 4096);
    if (S.write_error >= 0 && S.sent.len > 0) { /* fails on the second chunk */
        err->tag = (uint8_t)S.write_error;
        if (S.write_error == WASI_IO_STREAMS_STREAM_ERROR_LAST_OPERATION_FAILED)
            err->val.last_operation_failed.__handle = res_new(R_IOERR, 0);
        return false;
    }
    sbuf_add(&S.sent, c->ptr, c->len);
    return true;
}
void wasi_io_streams_output_stream_drop_own(wasi_io_streams_own_output_stream_t h) { res_drop(h.__handle, R_OSTREAM); }
bool wasi_http_types_static_outgoing_body_finish(wasi_http_types_own_outgoing_body_t b, wasi_http_types_own_trailers_t *t, wasi_http_types_error_code_t *err) {
    assert(!t);
    res_drop(b.__handle, R_OBODY);
    S.finished = true;
    return true;
}
void wasi_http_types_outgoing_body_drop_own(wasi_http_types_own_outgoing_body_t h) { res_drop(h.__handle, R_OBODY); }
wasi_io_error_borrow_error_t wasi_io_error_borrow_error(wasi_io_error_own_error_t h) { return (wasi_io_error_borrow_error_t){h.__handle}; }
bool wasi_http_types_http_error_code(wasi_io_error_borrow_error_t e, wasi_http_types_error_code_t *ret) {
    res_check(e.__handle, R_IOERR);
    make_code(ret, WASI_HTTP_TYPES_ERROR_CODE_CONNECTION_TERMINATED);
    return !S.body_error; /* body errors: no http code, only a debug string */
}
void wasi_io_error_method_error_to_debug_string(wasi_io_error_borrow_error_t e, wd_wit_string_t *ret) {
    res_check(e.__handle, R_IOERR);
    *ret = (wd_wit_string_t){host_bytes("reset by peer", 13), 13};
}
void wasi_io_error_error_drop_own(wasi_io_error_own_error_t h) { res_drop(h.__handle, R_IOERR); }
wasi_http_types_borrow_future_incoming_response_t wasi_http_types_borrow_future_incoming_response(wasi_http_types_own_future_incoming_response_t h) {
    return (wasi_http_types_borrow_future_incoming_response_t){h.__handle};
}
wasi_io_poll_own_pollable_t wasi_http_types_method_future_incoming_response_subscribe(wasi_http_types_borrow_future_incoming_response_t f) {
    res_check(f.__handle, R_FUTURE);
    return (wasi_io_poll_own_pollable_t){res_new(R_POLL, f.__handle)};
}
wasi_io_poll_borrow_pollable_t wasi_io_poll_borrow_pollable(wasi_io_poll_own_pollable_t h) { return (wasi_io_poll_borrow_pollable_t){h.__handle}; }
void wasi_io_poll_method_pollable_block(wasi_io_poll_borrow_pollable_t p) { res_check(p.__handle, R_POLL); }
void wasi_io_poll_pollable_drop_own(wasi_io_poll_own_pollable_t h) { res_drop(h.__handle, R_POLL); }
bool wasi_http_types_method_future_incoming_response_get(wasi_http_types_borrow_future_incoming_response_t f, wasi_http_types_result_result_own_incoming_response_error_code_void_t *ret) {
    res_check(f.__handle, R_FUTURE);
    memset(ret, 0, sizeof *ret);
    if (S.future_error >= 0) {
        ret->val.ok.is_err = true;
        make_code(&ret->val.ok.val.err, S.future_error);
    } else {
        ret->val.ok.val.ok.__handle = res_new(R_IRESP, 0);
    }
    return true;
}
void wasi_http_types_future_incoming_response_drop_own(wasi_http_types_own_future_incoming_response_t h) { res_drop(h.__handle, R_FUTURE); }
wasi_http_types_borrow_incoming_response_t wasi_http_types_borrow_incoming_response(wasi_http_types_own_incoming_response_t h) {
    return (wasi_http_types_borrow_incoming_response_t){h.__handle};
}
uint16_t wasi_http_types_method_incoming_response_status(wasi_http_types_borrow_incoming_response_t r) {
    res_check(r.__handle, R_IRESP);
    return S.status;
}
wasi_http_types_own_fields_t wasi_http_types_method_incoming_response_headers(wasi_http_types_borrow_incoming_response_t r) {
    res_check(r.__handle, R_IRESP);
    return (wasi_http_types_own_fields_t){res_new(R_HEADERS, r.__handle)};
}
wasi_http_types_borrow_fields_t wasi_http_types_borrow_fields(wasi_http_types_own_fields_t h) { return (wasi_http_types_borrow_fields_t){h.__handle}; }
void wasi_http_types_method_fields_entries(wasi_http_types_borrow_fields_t f, wasi_http_types_list_tuple2_field_name_field_value_t *ret) {
    res_check(f.__handle, R_HEADERS);
    size_t n = 0;
    while (n < 4 && S.resp_headers[n][0]) n++;
    ret->len = n;
    ret->ptr = n ? malloc(n * sizeof *ret->ptr) : (void *)4;
    for (size_t i = 0; i < n; i++) {
        size_t a = strlen(S.resp_headers[i][0]), b = strlen(S.resp_headers[i][1]);
        ret->ptr[i].f0 = (wd_wit_string_t){host_bytes(S.resp_headers[i][0], a), a};
        ret->ptr[i].f1 = (wasi_http_types_field_value_t){host_bytes(S.resp_headers[i][1], b), b};
    }
}
void wasi_http_types_fields_drop_own(wasi_http_types_own_fields_t h) { res_drop(h.__handle, R_HEADERS); }
bool wasi_http_types_method_incoming_response_consume(wasi_http_types_borrow_incoming_response_t r, wasi_http_types_own_incoming_body_t *ret) {
    res_check(r.__handle, R_IRESP);
    ret->__handle = res_new(R_IBODY, r.__handle);
    return true;
}
wasi_http_types_borrow_incoming_body_t wasi_http_types_borrow_incoming_body(wasi_http_types_own_incoming_body_t h) { return (wasi_http_types_borrow_incoming_body_t){h.__handle}; }
bool wasi_http_types_method_incoming_body_stream(wasi_http_types_borrow_incoming_body_t b, wasi_io_streams_own_input_stream_t *ret) {
    res_check(b.__handle, R_IBODY);
    ret->__handle = res_new(R_ISTREAM, b.__handle);
    return true;
}
wasi_io_streams_borrow_input_stream_t wasi_io_streams_borrow_input_stream(wasi_io_streams_own_input_stream_t h) { return (wasi_io_streams_borrow_input_stream_t){h.__handle}; }
bool wasi_io_streams_method_input_stream_blocking_read(wasi_io_streams_borrow_input_stream_t s, uint64_t len, wd_wit_list_u8_t *ret, wasi_io_streams_stream_error_t *err) {
    res_check(s.__handle, R_ISTREAM);
    if (S.served == S.resp_body_len) {
        if (S.body_error && S.served) { /* fails after some bytes */
            err->tag = WASI_IO_STREAMS_STREAM_ERROR_LAST_OPERATION_FAILED;
            err->val.last_operation_failed.__handle = res_new(R_IOERR, 0);
        } else {
            err->tag = WASI_IO_STREAMS_STREAM_ERROR_CLOSED;
        }
        return false;
    }
    static bool empty_next = true; /* an empty read now and then: ptr (void *)1, len 0 */
    size_t n = empty_next ? 0 : S.resp_body_len - S.served;
    empty_next = !empty_next;
    if (n > S.read_chunk) n = S.read_chunk;
    if (n > len) n = (size_t)len;
    *ret = (wd_wit_list_u8_t){host_bytes(S.resp_body + S.served, n), n};
    S.served += n;
    return true;
}
void wasi_io_streams_input_stream_drop_own(wasi_io_streams_own_input_stream_t h) { res_drop(h.__handle, R_ISTREAM); }
wasi_http_types_own_future_trailers_t wasi_http_types_static_incoming_body_finish(wasi_http_types_own_incoming_body_t b) {
    res_drop(b.__handle, R_IBODY);
    return (wasi_http_types_own_future_trailers_t){res_new(R_TRAILERS, 0)};
}
void wasi_http_types_future_trailers_drop_own(wasi_http_types_own_future_trailers_t h) { res_drop(h.__handle, R_TRAILERS); }
void wasi_http_types_incoming_response_drop_own(wasi_http_types_own_incoming_response_t h) { res_drop(h.__handle, R_IRESP); }
void wasi_http_types_incoming_body_drop_own(wasi_http_types_own_incoming_body_t h) { res_drop(h.__handle, R_IBODY); }

/* ==== helpers ============================================================================= */

static bool eq(const wd_wit_string_t *s, const char *want) {
    return s->len == strlen(want) && memcmp(s->ptr, want, s->len) == 0;
}
static void check_err(wd_error *e, const char *code, const char *reason, const char *message) {
    if (code) assert(e->codes.len == 1 && eq(&e->codes.ptr[0], code));
    else assert(e->codes.len == 0);
    if (!eq(&e->reason, reason) || (message && !eq(&e->message, message))) {
        fprintf(stderr, "got %.*s: %.*s\n", (int)e->reason.len, (char *)e->reason.ptr,
                (int)e->message.len, (char *)e->message.ptr);
        assert(!"unexpected error");
    }
    wd_error_clear(e);
}
static bool msg_has(const wd_error *e, const char *s) {
    char buf[2048];
    snprintf(buf, sizeof buf, "%.*s", (int)e->message.len, (char *)e->message.ptr);
    return strstr(buf, s) != NULL;
}

static wd_invocation invocation(const char *target, const char *content) {
    wd_invocation inv;
    memset(&inv, 0, sizeof inv);
    if (target) wd_doc_parse(&inv.target, xstrdup(target), strlen(target));
    if (content) wd_doc_parse(&inv.target_content, xstrdup(content), strlen(content));
    return inv;
}
static void invocation_free(wd_invocation *inv) {
    wd_doc_free(&inv->target);
    wd_doc_free(&inv->target_content);
}

#define HTTP_TARGET "{\"metadata\":{\"name\":\"api\"},\"spec\":{\"type\":\"wasm-deployer.dev/http-api\"}}"

int main(void) {
    wd_error err;
    memset(&err, 0, sizeof err);
    char *s;

    /* join */
    const char *bases[] = {"https://h/v1", "https://h/v1/", "https://h/v1//"};
    const char *paths[] = {"things/a", "/things/a"};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) {
            s = wd_http_join(bases[i], paths[j]);
            assert(strcmp(s, "https://h/v1/things/a") == 0);
            free(s);
        }
    s = wd_http_join("https://h/v1/", "");
    assert(strcmp(s, "https://h/v1/") == 0);
    free(s);

    /* check_path */
    const char *good[] = {"things/a", "/a/b?x=1", "a..b/c", "...", "a/.b", "x?next=../y", "", NULL};
    for (int i = 0; good[i]; i++) assert(wd_http_check_path(good[i], &err));
    const char *bad[] = {"..", "../x", "a/../b", "a/..", "a\\..\\b", "%2e%2e/x", "a/.%2E/b",
                         "https://evil/x", "//evil/x", "a?u=http://x", NULL};
    for (int i = 0; bad[i]; i++) {
        assert(!wd_http_check_path(bad[i], &err));
        check_err(&err, WD_ERR_CONFIGURATION_PROBLEM, "InvalidPath", NULL);
    }

    /* status mapping */
    assert(wd_http_status_error("PUT", "https://h/a", 200, "ok", 2, &err));
    assert(wd_http_status_error("PUT", "https://h/a", 302, "", 0, &err));
    assert(!wd_http_status_error("put", "https://h/a", 401, " {\"e\":1}\n", 9, &err));
    check_err(&err, WD_ERR_UNAUTHORIZED, "Unauthorized", "PUT https://h/a: 401 {\"e\":1}");
    assert(!wd_http_status_error("GET", "https://h/a", 403, NULL, 0, &err));
    check_err(&err, WD_ERR_UNAUTHORIZED, "Unauthorized", "GET https://h/a: 403");
    assert(!wd_http_status_error("DELETE", "https://h/a", 404, "nope", 4, &err));
    check_err(&err, WD_ERR_CONFIGURATION_PROBLEM, "HttpClientError", "DELETE https://h/a: 404 nope");
    assert(!wd_http_status_error("PUT", "https://h/a", 503, "bad\xff\0x", 6, &err));
    check_err(&err, NULL, "HttpServerError", "PUT https://h/a: 503 bad\xEF\xBF\xBD\xEF\xBF\xBDx");
    char big[1200];
    for (int i = 0; i < 600; i++) memcpy(big + 2 * i, "\xc3\xa9", 2); /* 600 x U+00E9 */
    assert(!wd_http_status_error("PUT", "u", 500, big, sizeof big, &err));
    assert(err.message.len == strlen("PUT u: 500 ") + 500 * 2 + 3);
    assert(memcmp(err.message.ptr + err.message.len - 5, "\xc3\xa9...", 5) == 0);
    check_err(&err, NULL, "HttpServerError", NULL);

    /* transport mapping */
    assert(!wd_http_transport_error("put", "https://h/a", "connection-refused", NULL, &err));
    check_err(&err, NULL, "HttpRequestFailed", "PUT https://h/a: wasi:http error connection-refused");
    assert(!wd_http_transport_error("GET", "https://h/a", "DNS-error", "NXDOMAIN 3", &err));
    check_err(&err, NULL, "HttpRequestFailed", "GET https://h/a: wasi:http error DNS-error (NXDOMAIN 3)");
    assert(!wd_http_transport_error("GET", "https://x/a", WD_HTTP_REQUEST_DENIED, NULL, &err));
    assert(msg_has(&err, "GET https://x/a: not allowed by the host (wasi:http error HTTP-request-denied)"));
    check_err(&err, WD_ERR_CONFIGURATION_PROBLEM, "HttpNotAllowed", NULL);

    /* wd_target_url */
    wd_invocation inv = invocation(HTTP_TARGET, "{\"url\":\" https://api.example.com/v1 \"}");
    assert(wd_target_url(&inv, "things/a", &s, &err) && strcmp(s, "https://api.example.com/v1/things/a") == 0);
    free(s);
    assert(wd_target_url(&inv, NULL, &s, &err) && strcmp(s, "https://api.example.com/v1") == 0);
    free(s);
    assert(!wd_target_url(&inv, "../x", &s, &err) && !s);
    check_err(&err, WD_ERR_CONFIGURATION_PROBLEM, "InvalidPath", NULL);
    invocation_free(&inv);
    inv = invocation(NULL, NULL);
    assert(!wd_target_url(&inv, "a", &s, &err));
    check_err(&err, WD_ERR_CONFIGURATION_PROBLEM, "NoTarget", NULL);
    inv = invocation("{\"metadata\":{\"name\":\"k\"},\"spec\":{\"type\":\"landscaper.gardener.cloud/kubernetes-cluster\"}}", "{}");
    assert(!wd_target_url(&inv, "a", &s, &err));
    check_err(&err, WD_ERR_CONFIGURATION_PROBLEM, "TargetType",
              "Target \"k\" has type \"landscaper.gardener.cloud/kubernetes-cluster\"; HTTP requests "
              "need a Target of type \"wasm-deployer.dev/http-api\"");
    invocation_free(&inv);
    const char *bad_content[] = {"{}", "{\"url\":1}", "{\"url\":\"  \"}", "{\"url\":\"ftp://h/\"}",
                                 "{\"url\":\"https:///x\"}", "[]", NULL};
    for (int i = 0; bad_content[i]; i++) {
        inv = invocation(HTTP_TARGET, bad_content[i]);
        assert(!wd_target_url(&inv, "a", &s, &err) && !s);
        check_err(&err, WD_ERR_CONFIGURATION_PROBLEM, "TargetUrl", NULL);
        invocation_free(&inv);
    }

    /* client: a PUT with a JSON body over two write chunks, response read in small pieces */
    wd_http_response r;
    char body[5000];
    memset(body, 'b', sizeof body);
    body[0] = '"';
    body[sizeof body - 1] = '"';
    char *json = malloc(sizeof body + 1);
    memcpy(json, body, sizeof body);
    json[sizeof body] = '\0';
    scenario();
    S.resp_body = "{\"ok\": true}";
    S.resp_body_len = strlen(S.resp_body);
    S.resp_headers[0][0] = "Content-Type";
    S.resp_headers[0][1] = "application/json";
    assert(wd_http_send_json("put", "HTTPS://api.example.com:8443/v1/things/a?x=1#frag", json, &r, &err));
    assert(S.method_tag == WASI_HTTP_TYPES_METHOD_PUT && S.scheme_tag == WASI_HTTP_TYPES_SCHEME_HTTPS);
    assert(strcmp(S.authority, "api.example.com:8443") == 0 && strcmp(S.path, "/v1/things/a?x=1") == 0);
    assert(strcmp(S.headers, "Content-Type: application/json\nAccept: application/json\n"
                             "content-length: 5000\n") == 0);
    assert(S.sent.len == sizeof body && memcmp(S.sent.p, body, sizeof body) == 0 && S.finished);
    assert(r.status == 200 && r.body_len == S.resp_body_len && strcmp(r.body, S.resp_body) == 0);
    assert(r.n_headers == 1 && strcmp(r.headers[0].name, "content-type") == 0);
    assert(strcmp(wd_http_response_header(&r, "CONTENT-TYPE"), "application/json") == 0);
    assert(!wd_http_response_header(&r, "location"));
    assert(wd_http_response_json(&r).kind == WD_JSON_OBJECT && wd_http_is_success(&r));
    assert(wd_http_error_for_status("PUT", "u", &r, &err));
    wd_http_response_free(&r);
    free(json);
    all_dropped();

    /* a DELETE without body or headers, empty answer; the path defaults to "/" */
    scenario();
    S.status = 404;
    assert(wd_http_request("DELETE", "http://h", NULL, 0, NULL, 0, &r, &err));
    assert(S.method_tag == WASI_HTTP_TYPES_METHOD_DELETE && S.scheme_tag == WASI_HTTP_TYPES_SCHEME_HTTP);
    assert(strcmp(S.path, "/") == 0 && S.headers[0] == '\0' && S.sent.len == 0 && S.finished);
    assert(r.status == 404 && r.body && r.body_len == 0 && r.n_headers == 0);
    assert(wd_http_response_json(&r).kind == WD_JSON_MISSING && !wd_http_is_success(&r));
    assert(!wd_http_error_for_status("DELETE", "http://h", &r, &err));
    check_err(&err, WD_ERR_CONFIGURATION_PROBLEM, "HttpClientError", "DELETE http://h: 404");
    wd_http_response_free(&r);
    all_dropped();

    /* PUT without body: content-length 0; an unusual method goes as `other` */
    scenario();
    assert(wd_http_request("PUT", "http://h/a", NULL, 0, NULL, 0, &r, &err));
    assert(strcmp(S.headers, "content-length: 0\n") == 0);
    wd_http_response_free(&r);
    all_dropped();
    scenario();
    wd_http_header hs[] = {{"Content-Length", "0"}, {NULL, "skipped"}};
    assert(wd_http_request("purge", "http://h/a", hs, 2, NULL, 0, &r, &err));
    assert(S.method_tag == WASI_HTTP_TYPES_METHOD_OTHER && strcmp(S.method_other, "PURGE") == 0);
    assert(strcmp(S.headers, "Content-Length: 0\n") == 0);
    wd_http_response_free(&r);
    all_dropped();

    /* refused by the host at once, and a transport failure while waiting */
    scenario();
    S.handle_error = WASI_HTTP_TYPES_ERROR_CODE_HTTP_REQUEST_DENIED;
    assert(!wd_http_request("GET", "https://other/x", NULL, 0, NULL, 0, &r, &err));
    assert(!r.body && !r.headers);
    check_err(&err, WD_ERR_CONFIGURATION_PROBLEM, "HttpNotAllowed", NULL);
    wd_http_response_free(&r);
    all_dropped();
    scenario();
    S.future_error = WASI_HTTP_TYPES_ERROR_CODE_CONNECTION_REFUSED;
    assert(!wd_http_request("post", "http://h/x", NULL, 0, "{}", 2, &r, &err));
    check_err(&err, NULL, "HttpRequestFailed", "POST http://h/x: wasi:http error connection-refused");
    all_dropped();
    scenario();
    S.future_error = WASI_HTTP_TYPES_ERROR_CODE_DNS_ERROR;
    assert(!wd_http_request("GET", "http://nowhere/x", NULL, 0, NULL, 0, &r, &err));
    check_err(&err, NULL, "HttpRequestFailed", "GET http://nowhere/x: wasi:http error DNS-error (NXDOMAIN 3)");
    all_dropped();
    scenario();
    S.handle_error = WASI_HTTP_TYPES_ERROR_CODE_INTERNAL_ERROR;
    assert(!wd_http_request("GET", "http://h/x", NULL, 0, NULL, 0, &r, &err));
    check_err(&err, NULL, "HttpRequestFailed", "GET http://h/x: wasi:http error internal-error (boom)");
    all_dropped();

    /* the body write fails on its second chunk: the response (if any) still decides */
    scenario();
    S.write_error = WASI_IO_STREAMS_STREAM_ERROR_LAST_OPERATION_FAILED;
    char *large = calloc(1, 9000);
    assert(!wd_http_request("PUT", "http://h/x", NULL, 0, large, 9000, &r, &err));
    assert(!S.finished);
    check_err(&err, NULL, "HttpRequestFailed", "PUT http://h/x: wasi:http error connection-terminated");
    all_dropped();
    scenario();
    S.write_error = WASI_IO_STREAMS_STREAM_ERROR_CLOSED;
    S.future_error = WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_TIMEOUT;
    assert(!wd_http_request("PUT", "http://h/x", NULL, 0, large, 9000, &r, &err));
    check_err(&err, NULL, "HttpRequestFailed", "PUT http://h/x: wasi:http error HTTP-response-timeout");
    all_dropped();
    free(large);

    /* the response body breaks off */
    scenario();
    S.resp_body = "partial";
    S.resp_body_len = 7;
    S.body_error = true;
    assert(!wd_http_request("GET", "http://h/x", NULL, 0, NULL, 0, &r, &err));
    assert(!r.body);
    check_err(&err, NULL, "HttpRequestFailed", "GET http://h/x: wasi:http error internal-error (reset by peer)");
    all_dropped();

    /* bad URLs and headers: nothing is sent */
    const char *bad_urls[] = {"ftp://h/x", "h/x", "https://", "https:///x", "", NULL};
    for (int i = 0; bad_urls[i]; i++) {
        scenario();
        assert(!wd_http_request("GET", bad_urls[i], NULL, 0, NULL, 0, &r, &err));
        assert(msg_has(&err, "HTTP-request-URI-invalid"));
        check_err(&err, NULL, "HttpRequestFailed", NULL);
        assert(n_res == 1);
    }
    scenario();
    S.header_error = true;
    assert(!wd_http_request("GET", "http://h/x", NULL, 0, NULL, 0, &r, &err));
    assert(msg_has(&err, "invalid request header (forbidden)"));
    check_err(&err, NULL, "HttpRequestFailed", NULL);
    all_dropped();

    scenario(); /* frees the recorded body */
    puts("http_test: ok");
    return 0;
}
