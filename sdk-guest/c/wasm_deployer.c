/*
 * wasm_deployer.c -- the C plugin helper (see wasm_deployer.h for the API and its rules).
 *
 * Owns: the JSON reader/writer, the WIT record builders and ownership rules, the glue between
 * the generated export functions and the plugin's callbacks, and thin wrappers over the host
 * imports. Must not: keep state between calls (one instance serves one call), or touch
 * anything the host owns (status, timestamps, finalizers, export Secrets).
 *
 * Memory rules of the generated bindings (wit-bindgen-c 0.63, toolchains.md section 7):
 * - Arguments of an export (the invocation, the hook input) are malloc'd by the canonical ABI
 *   and belong to the callee: the glue takes them over and frees them.
 * - Results of an export are freed by the generated post-return code with free(), and only
 *   if their length is > 0. So every string/list we return is malloc'd, and empty ones are
 *   {NULL, 0}.
 * - Results of an import are malloc'd (cabi_realloc = realloc) and belong to us. An EMPTY
 *   string or list from the host has ptr == (void *)align, len == 0: never free or realloc a
 *   pointer whose length is 0 (the helpers below treat such a pointer as NULL).
 */
#include "wasm_deployer.h"

#include <stdio.h>
#include <string.h>

/* ==== small utilities ===================================================================== */

typedef wd_wit_string_t wstr;

/* vsnprintf into a malloc'd buffer (NULL on OOM or a bad format). */
static char *vformat(const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) return NULL;
    char *buf = malloc((size_t)n + 1);
    if (buf) vsnprintf(buf, (size_t)n + 1, fmt, ap);
    return buf;
}

static char *xstrdup(const char *s) {
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

/* Set a WIT string to a malloc'd copy of s[0..n) ({NULL,0} when empty). */
static void wstr_setn(wstr *w, const char *s, size_t n) {
    w->ptr = NULL;
    w->len = 0;
    if (!s || n == 0) return;
    w->ptr = malloc(n);
    if (!w->ptr) return; /* OOM: leave it empty rather than trap */
    memcpy(w->ptr, s, n);
    w->len = n;
}
static void wstr_set(wstr *w, const char *s) { wstr_setn(w, s, s ? strlen(s) : 0); }

/* Take a WIT string over as a NUL-terminated malloc'd C string (length in *len). The WIT
 * string is left empty. Returns NULL only on OOM. */
static char *wstr_take(wstr *w, size_t *len) {
    char *s;
    size_t n = w->len;
    if (n == 0) {
        s = malloc(1); /* w->ptr may be (void *)1 here: do not touch it */
    } else {
        s = realloc(w->ptr, n + 1);
        if (!s) free(w->ptr);
    }
    w->ptr = NULL;
    w->len = 0;
    if (!s) return NULL;
    s[n] = '\0';
    if (len) *len = n;
    return s;
}

/* Grow a WIT list by one zeroed element; NULL on OOM. `*ptr` may be the (void *)align of an
 * empty list from the host. */
static void *list_push(void **ptr, size_t *len, size_t elem) {
    void *old = *len ? *ptr : NULL;
    if (*len > (SIZE_MAX / elem) - 1) return NULL;
    char *grown = realloc(old, (*len + 1) * elem);
    if (!grown) return NULL;
    memset(grown + *len * elem, 0, elem);
    *ptr = grown;
    return grown + (*len)++ * elem;
}

/* ==== JSON reader ========================================================================= */

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* p at the opening quote: the position after the closing quote, or NULL. */
static const char *scan_string(const char *p, const char *end) {
    p++;
    while (p < end) {
        unsigned char c = (unsigned char)*p;
        if (c == '"') return p + 1;
        if (c < 0x20) return NULL; /* raw control characters are not allowed */
        if (c == '\\') {
            if (++p >= end) return NULL;
            switch (*p) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                p++;
                break;
            case 'u':
                if (end - p < 5) return NULL;
                for (int i = 1; i <= 4; i++)
                    if (hexval(p[i]) < 0) return NULL;
                p += 5;
                break;
            default:
                return NULL;
            }
        } else {
            p++;
        }
    }
    return NULL;
}

static const char *scan_digits(const char *p, const char *end) {
    const char *start = p;
    while (p < end && *p >= '0' && *p <= '9') p++;
    return p == start ? NULL : p;
}

static const char *scan_number(const char *p, const char *end) {
    if (p < end && *p == '-') p++;
    if (p < end && *p == '0') {
        p++;
    } else if (!(p = scan_digits(p, end))) {
        return NULL;
    }
    if (p < end && *p == '.' && !(p = scan_digits(p + 1, end))) return NULL;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (!(p = scan_digits(p, end))) return NULL;
    }
    return p;
}

static const char *scan_literal(const char *p, const char *end, const char *lit) {
    size_t n = strlen(lit);
    if ((size_t)(end - p) < n || memcmp(p, lit, n) != 0) return NULL;
    return p + n;
}

/* Scan one value starting exactly at p (no leading white space). Fills *out (kind + span)
 * and returns the position after it, or NULL on a syntax error or too deep nesting. */
static const char *scan_value(const char *p, const char *end, int depth, wd_json *out) {
    if (p >= end) return NULL;
    const char *start = p;
    wd_json_kind kind;
    wd_json ignored;
    switch (*p) {
    case '{':
    case '[': {
        char close = *p == '{' ? '}' : ']';
        kind = *p == '{' ? WD_JSON_OBJECT : WD_JSON_ARRAY;
        if (depth >= WD_JSON_MAX_DEPTH) return NULL;
        p = skip_ws(p + 1, end);
        if (p < end && *p == close) {
            p++;
            break;
        }
        for (;;) {
            if (kind == WD_JSON_OBJECT) {
                if (p >= end || *p != '"' || !(p = scan_string(p, end))) return NULL;
                p = skip_ws(p, end);
                if (p >= end || *p != ':') return NULL;
                p = skip_ws(p + 1, end);
            }
            if (!(p = scan_value(p, end, depth + 1, &ignored))) return NULL;
            p = skip_ws(p, end);
            if (p < end && *p == ',') {
                p = skip_ws(p + 1, end);
                continue;
            }
            if (p < end && *p == close) {
                p++;
                break;
            }
            return NULL;
        }
        break;
    }
    case '"':
        kind = WD_JSON_STRING;
        p = scan_string(p, end);
        break;
    case 't':
        kind = WD_JSON_BOOL;
        p = scan_literal(p, end, "true");
        break;
    case 'f':
        kind = WD_JSON_BOOL;
        p = scan_literal(p, end, "false");
        break;
    case 'n':
        kind = WD_JSON_NULL;
        p = scan_literal(p, end, "null");
        break;
    default:
        kind = WD_JSON_NUMBER;
        p = scan_number(p, end);
        break;
    }
    if (!p) return NULL;
    out->kind = kind;
    out->ptr = start;
    out->len = (size_t)(p - start);
    return p;
}

static const wd_json MISSING = {WD_JSON_MISSING, NULL, 0};

wd_json wd_json_parse(const char *text, size_t len) {
    wd_json v;
    if (!text) return MISSING;
    const char *end = text + len;
    const char *p = scan_value(skip_ws(text, end), end, 0, &v);
    if (!p || skip_ws(p, end) != end) return MISSING;
    return v;
}

bool wd_doc_parse(wd_doc *doc, char *text, size_t len) {
    doc->text = text;
    doc->len = len;
    doc->root = wd_json_parse(text, len);
    return doc->root.kind != WD_JSON_MISSING;
}

void wd_doc_free(wd_doc *doc) {
    free(doc->text);
    doc->text = NULL;
    doc->len = 0;
    doc->root = MISSING;
}

/* Decode the string value whose text (quotes included) is s[0..n) into dst (which has room
 * for n bytes: decoding never grows the text). Returns the decoded length. The span was
 * validated by scan_string, so escapes are well-formed. */
static size_t decode_string(const char *s, size_t n, char *dst) {
    const char *p = s + 1, *end = s + n - 1;
    char *o = dst;
    while (p < end) {
        if (*p != '\\') {
            *o++ = *p++;
            continue;
        }
        p++;
        char e = *p++;
        switch (e) {
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            uint32_t cp = 0;
            for (int i = 0; i < 4; i++) cp = cp << 4 | (uint32_t)hexval(p[i]);
            p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
                uint32_t lo = 0;
                for (int i = 2; i < 6; i++) lo = lo << 4 | (uint32_t)hexval(p[i]);
                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p += 6;
                }
            }
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD; /* lone surrogate */
            /* UTF-8: at most 4 bytes out for >= 6 bytes in ("\uXXXX" or a pair) */
            if (cp < 0x80) {
                *o++ = (char)cp;
            } else if (cp < 0x800) {
                *o++ = (char)(0xC0 | cp >> 6);
                *o++ = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                *o++ = (char)(0xE0 | cp >> 12);
                *o++ = (char)(0x80 | (cp >> 6 & 0x3F));
                *o++ = (char)(0x80 | (cp & 0x3F));
            } else {
                *o++ = (char)(0xF0 | cp >> 18);
                *o++ = (char)(0x80 | (cp >> 12 & 0x3F));
                *o++ = (char)(0x80 | (cp >> 6 & 0x3F));
                *o++ = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: *o++ = e; break; /* " \ / */
        }
    }
    return (size_t)(o - dst);
}

char *wd_json_string(wd_json v, size_t *len_out) {
    if (v.kind != WD_JSON_STRING || v.len < 2) return NULL;
    char *s = malloc(v.len); /* decoded length <= v.len - 2, plus NUL */
    if (!s) return NULL;
    size_t n = decode_string(v.ptr, v.len, s);
    s[n] = '\0';
    if (len_out) *len_out = n;
    return s;
}

bool wd_json_string_eq(wd_json v, const char *s) {
    if (v.kind != WD_JSON_STRING || v.len < 2) return false;
    size_t n = strlen(s);
    if (!memchr(v.ptr, '\\', v.len)) /* plain string: compare in place */
        return v.len - 2 == n && memcmp(v.ptr + 1, s, n) == 0;
    size_t dn;
    char *d = wd_json_string(v, &dn);
    bool eq = d && dn == n && memcmp(d, s, n) == 0;
    free(d);
    return eq;
}

bool wd_json_bool(wd_json v, bool *out) {
    if (v.kind != WD_JSON_BOOL) return false;
    *out = v.ptr[0] == 't';
    return true;
}

const char *wd_json_kind_name(wd_json_kind kind) {
    switch (kind) {
    case WD_JSON_NULL: return "null";
    case WD_JSON_BOOL: return "bool";
    case WD_JSON_NUMBER: return "number";
    case WD_JSON_STRING: return "string";
    case WD_JSON_ARRAY: return "array";
    case WD_JSON_OBJECT: return "object";
    default: return "missing";
    }
}

/* An iterator over the inside of an object or array. */
static wd_json_iter iter_open(wd_json v) {
    wd_json_iter it = {NULL, NULL};
    if ((v.kind == WD_JSON_OBJECT || v.kind == WD_JSON_ARRAY) && v.len >= 2) {
        it.p = v.ptr + 1;             /* after { or [ */
        it.end = v.ptr + v.len - 1;   /* at } or ] */
    }
    return it;
}

wd_json_iter wd_json_members(wd_json obj) {
    wd_json_iter none = {NULL, NULL};
    return obj.kind == WD_JSON_OBJECT ? iter_open(obj) : none;
}

/* The next element of an object (key != NULL) or array (key == NULL). */
static bool iter_next(wd_json_iter *it, wd_json *key, wd_json *val) {
    if (!it->p) return false;
    const char *p = skip_ws(it->p, it->end);
    if (p < it->end && *p == ',') p = skip_ws(p + 1, it->end);
    if (p >= it->end) {
        it->p = NULL;
        return false;
    }
    if (key) {
        if (!(p = scan_value(p, it->end, 0, key)) || key->kind != WD_JSON_STRING) goto bad;
        p = skip_ws(p, it->end);
        if (p >= it->end || *p != ':') goto bad;
        p = skip_ws(p + 1, it->end);
    }
    /* depth 0: the document was depth-checked when it was parsed */
    if (!(p = scan_value(p, it->end, 0, val))) goto bad;
    it->p = p;
    return true;
bad: /* only reachable for spans that did not come from a parsed document */
    it->p = NULL;
    return false;
}

bool wd_json_next(wd_json_iter *it, wd_json *key, wd_json *val) {
    return iter_next(it, key, val);
}

wd_json wd_json_member(wd_json obj, const char *key) {
    if (obj.kind != WD_JSON_OBJECT || !key) return MISSING;
    wd_json_iter it = wd_json_members(obj);
    wd_json k, v;
    while (iter_next(&it, &k, &v))
        if (wd_json_string_eq(k, key)) return v; /* first one wins on duplicate keys */
    return MISSING;
}

wd_json wd_json_path(wd_json v, const char *path) {
    char seg[256];
    const char *p = path;
    while (p && *p) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (n >= sizeof seg) return MISSING;
        memcpy(seg, p, n);
        seg[n] = '\0';
        v = wd_json_member(v, seg);
        if (v.kind == WD_JSON_MISSING) return v;
        p = dot ? dot + 1 : NULL;
    }
    return v;
}

wd_json wd_json_index(wd_json arr, size_t index) {
    if (arr.kind != WD_JSON_ARRAY) return MISSING;
    wd_json_iter it = iter_open(arr);
    wd_json v;
    for (size_t i = 0; iter_next(&it, NULL, &v); i++)
        if (i == index) return v;
    return MISSING;
}

/* ==== JSON writer ========================================================================= */

void wd_jw_init(wd_jw *w) {
    memset(w, 0, sizeof *w);
    w->first[0] = true;
}

static void jw_append(wd_jw *w, const char *s, size_t n) {
    if (w->failed) return;
    if (n > SIZE_MAX - w->len - 1) {
        w->failed = true;
        return;
    }
    if (w->len + n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->len + n + 1) {
            if (cap > SIZE_MAX / 2) {
                w->failed = true;
                return;
            }
            cap *= 2;
        }
        char *b = realloc(w->buf, cap);
        if (!b) {
            w->failed = true;
            return;
        }
        w->buf = b;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

/* Comma and position checks before a value; false (and failed) on misuse. */
static bool jw_before_value(wd_jw *w) {
    if (w->failed) return false;
    if (w->depth == 0) {
        if (!w->first[0]) w->failed = true; /* only one top-level value */
        w->first[0] = false;
    } else if (w->object[w->depth]) {
        if (!w->after_key) w->failed = true; /* a value in an object needs a key first */
        w->after_key = false;
    } else {
        if (!w->first[w->depth]) jw_append(w, ",", 1);
        w->first[w->depth] = false;
    }
    return !w->failed;
}

static void jw_escaped(wd_jw *w, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    jw_append(w, "\"", 1);
    size_t run = 0; /* bytes that need no escaping are copied in runs */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[7];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:
            if (c < 0x20) {
                memcpy(u, "\\u00", 4);
                u[4] = hex[c >> 4];
                u[5] = hex[c & 15];
                u[6] = '\0';
                esc = u;
            }
        }
        if (esc) {
            jw_append(w, s + i - run, run);
            run = 0;
            jw_append(w, esc, strlen(esc));
        } else {
            run++;
        }
    }
    jw_append(w, s + n - run, run);
    jw_append(w, "\"", 1);
}

static void jw_open(wd_jw *w, bool object) {
    if (!jw_before_value(w)) return;
    if (w->depth >= WD_JSON_MAX_DEPTH) {
        w->failed = true;
        return;
    }
    jw_append(w, object ? "{" : "[", 1);
    w->depth++;
    w->first[w->depth] = true;
    w->object[w->depth] = object;
}

static void jw_close(wd_jw *w, bool object) {
    if (w->failed) return;
    if (w->depth == 0 || w->object[w->depth] != object || w->after_key) {
        w->failed = true;
        return;
    }
    jw_append(w, object ? "}" : "]", 1);
    w->depth--;
}

void wd_jw_begin_object(wd_jw *w) { jw_open(w, true); }
void wd_jw_end_object(wd_jw *w) { jw_close(w, true); }
void wd_jw_begin_array(wd_jw *w) { jw_open(w, false); }
void wd_jw_end_array(wd_jw *w) { jw_close(w, false); }

/* A key whose quoted text is given as is (from a parsed document) or escaped from `key`. */
static void jw_key_raw(wd_jw *w, const char *text, size_t n, bool quoted) {
    if (w->failed) return;
    if (w->depth == 0 || !w->object[w->depth] || w->after_key) {
        w->failed = true;
        return;
    }
    if (!w->first[w->depth]) jw_append(w, ",", 1);
    w->first[w->depth] = false;
    if (quoted) jw_append(w, text, n);
    else jw_escaped(w, text, n);
    jw_append(w, ":", 1);
    w->after_key = true;
}

void wd_jw_key(wd_jw *w, const char *key) {
    if (!key) {
        w->failed = true;
        return;
    }
    jw_key_raw(w, key, strlen(key), false);
}

void wd_jw_string_n(wd_jw *w, const char *s, size_t n) {
    if (jw_before_value(w)) jw_escaped(w, s, n);
}

void wd_jw_string(wd_jw *w, const char *s) {
    if (!s) wd_jw_null(w);
    else wd_jw_string_n(w, s, strlen(s));
}

void wd_jw_bool(wd_jw *w, bool b) {
    if (jw_before_value(w)) jw_append(w, b ? "true" : "false", b ? 4 : 5);
}

void wd_jw_int(wd_jw *w, int64_t i) {
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%lld", (long long)i);
    if (jw_before_value(w)) jw_append(w, buf, (size_t)n);
}

void wd_jw_null(wd_jw *w) {
    if (jw_before_value(w)) jw_append(w, "null", 4);
}

void wd_jw_value(wd_jw *w, wd_json v) {
    if (v.kind == WD_JSON_MISSING) wd_jw_null(w);
    else if (jw_before_value(w)) jw_append(w, v.ptr, v.len);
}

void wd_jw_kv_string(wd_jw *w, const char *key, const char *s) {
    wd_jw_key(w, key);
    wd_jw_string(w, s);
}

void wd_jw_kv_bool(wd_jw *w, const char *key, bool b) {
    wd_jw_key(w, key);
    wd_jw_bool(w, b);
}

char *wd_jw_finish(wd_jw *w) {
    char *out = w->buf;
    if (w->failed || w->depth != 0 || w->first[0] || !out) {
        free(out);
        out = NULL;
    }
    wd_jw_init(w);
    return out;
}

char *wd_json_with_member(wd_json obj, const char *key, const char *value_json) {
    if (obj.kind != WD_JSON_OBJECT || !key || !value_json) return NULL;
    wd_json value = wd_json_parse(value_json, strlen(value_json));
    if (value.kind == WD_JSON_MISSING) return NULL;
    wd_jw w;
    wd_jw_init(&w);
    wd_jw_begin_object(&w);
    bool replaced = false;
    wd_json_iter it = wd_json_members(obj);
    wd_json k, v;
    while (iter_next(&it, &k, &v)) {
        bool match = !replaced && wd_json_string_eq(k, key);
        jw_key_raw(&w, k.ptr, k.len, true);
        wd_jw_value(&w, match ? value : v);
        replaced |= match;
    }
    if (!replaced) {
        wd_jw_key(&w, key);
        wd_jw_value(&w, value);
    }
    wd_jw_end_object(&w);
    return wd_jw_finish(&w);
}

/* ==== log and clock ======================================================================= */

static void log_str(wd_log_level level, const char *msg) {
    wstr s = {(uint8_t *)msg, strlen(msg)}; /* borrowed: imports do not take ownership */
    wasm_deployer_plugin_log_log((wasm_deployer_plugin_log_log_level_t)level, &s);
}

void wd_log(wd_log_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = vformat(fmt, ap);
    va_end(ap);
    log_str(level, msg ? msg : fmt);
    free(msg);
}

uint64_t wd_now_unix_millis(void) { return wasm_deployer_plugin_clock_now_unix_millis(); }
uint64_t wd_monotonic_nanos(void) { return wasm_deployer_plugin_clock_monotonic_nanos(); }

char *wd_now_rfc3339(void) {
    wstr s;
    wasm_deployer_plugin_clock_now_rfc3339(&s);
    return wstr_take(&s, NULL);
}

/* ==== errors and responses ================================================================ */

void wd_error_clear(wd_error *err) {
    wasm_deployer_plugin_types_deployer_error_free(err); /* len-checked frees */
    memset(err, 0, sizeof *err);
}

bool wd_error_has_code(const wd_error *err, const char *code) {
    size_t n = strlen(code);
    for (size_t i = 0; i < err->codes.len; i++)
        if (err->codes.ptr[i].len == n && memcmp(err->codes.ptr[i].ptr, code, n) == 0) return true;
    return false;
}

/* Replace *err with (code, reason, message); takes ownership of `message` (may be NULL). */
static bool error_fill(wd_error *err, const char *code, const char *reason, char *message) {
    wd_error_clear(err);
    if (code) {
        wstr *c = list_push((void **)&err->codes.ptr, &err->codes.len, sizeof *c);
        if (c) wstr_set(c, code);
    }
    wstr_set(&err->reason, reason);
    wstr_set(&err->message, message ? message : "(out of memory formatting the message)");
    free(message);
    return false;
}

bool wd_error_set(wd_error *err, const char *code, const char *reason, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = vformat(fmt, ap);
    va_end(ap);
    return error_fill(err, code, reason, msg);
}

bool wd_config_error(wd_error *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = vformat(fmt, ap);
    va_end(ap);
    return error_fill(err, WD_ERR_CONFIGURATION_PROBLEM, "ParseProviderConfiguration", msg);
}

bool wd_internal_error(wd_error *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = vformat(fmt, ap);
    va_end(ap);
    return error_fill(err, WD_ERR_INTERNAL_PROBLEM, "InternalProblem", msg);
}

bool wd_fail(wd_error *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = vformat(fmt, ap);
    va_end(ap);
    log_str(WD_ERROR, msg ? msg : fmt);
    return error_fill(err, WD_ERR_INTERNAL_PROBLEM, "PluginFailed", msg);
}

static void option_set(wd_wit_option_string_t *o, const char *s) {
    if (o->is_some) wd_wit_string_free(&o->val);
    o->is_some = s != NULL;
    wstr_set(&o->val, s);
}

void wd_response_phase(wd_response *r, const char *phase) { option_set(&r->phase, phase); }
void wd_response_provider_status(wd_response *r, const char *json) {
    option_set(&r->provider_status, json);
}
void wd_response_exports(wd_response *r, const char *json) { option_set(&r->exports, json); }
void wd_response_retry_after_ms(wd_response *r, uint64_t ms) {
    r->retry_after_ms.is_some = true;
    r->retry_after_ms.val = ms;
}

static void add_condition(wasm_deployer_plugin_types_list_condition_report_t *list,
                          const char *type, wd_condition_status status, const char *reason,
                          const char *message) {
    wasm_deployer_plugin_types_condition_report_t *c =
        list_push((void **)&list->ptr, &list->len, sizeof *c);
    if (!c) return;
    wstr_set(&c->type, type);
    c->status = status;
    wstr_set(&c->reason, reason);
    wstr_set(&c->message, message);
    /* codes: [] ({NULL, 0}, zeroed by list_push) */
}

void wd_response_add_condition(wd_response *r, const char *type, wd_condition_status status,
                               const char *reason, const char *message) {
    add_condition(&r->conditions, type, status, reason, message);
}

void wd_error_add_condition(wd_error *err, const char *type, wd_condition_status status,
                            const char *reason, const char *message) {
    add_condition(&err->conditions, type, status, reason, message);
}

/* A failed step must say something: fill what the plugin left empty. */
static void error_finish(wd_error *err, const char *operation) {
    if (err->codes.len == 0 && err->message.len == 0)
        error_fill(err, WD_ERR_INTERNAL_PROBLEM, "PluginFailed",
                   xstrdup("the plugin reported a failure without an error"));
    if (err->operation.len == 0) wstr_set(&err->operation, operation);
}

/* A string at `path` of `v`, malloc'd; "" if absent or not a string. */
static char *string_at(wd_json v, const char *path) {
    char *s = wd_json_string(wd_json_path(v, path), NULL);
    return s ? s : xstrdup("");
}

/* Take an optional WIT string over as a document (root MISSING if none or not JSON). */
static void doc_from_option(wd_doc *doc, wd_wit_option_string_t *o) {
    memset(doc, 0, sizeof *doc);
    if (!o->is_some) return;
    size_t n = 0;
    char *text = wstr_take(&o->val, &n);
    o->is_some = false;
    if (text) wd_doc_parse(doc, text, n);
}

/* ==== deployer ============================================================================ */
#ifdef WD_HAVE_DEPLOYER

bool wd_config_string(const wd_invocation *inv, const char *path, char **out, wd_error *err) {
    *out = NULL;
    wd_json c = inv->config;
    if (c.kind == WD_JSON_MISSING || c.kind == WD_JSON_NULL)
        return error_fill(err, WD_ERR_CONFIGURATION_PROBLEM, "ProviderConfigurationMissing",
                          xstrdup("spec.config: provider configuration missing"));
    if (c.kind != WD_JSON_OBJECT)
        return wd_config_error(err, "spec.config: expected an object, got %s",
                               wd_json_kind_name(c.kind));
    wd_json v = wd_json_path(c, path);
    if (v.kind == WD_JSON_MISSING || v.kind == WD_JSON_NULL)
        return wd_config_error(err, "spec.config.%s: required string is missing", path);
    if (v.kind != WD_JSON_STRING)
        return wd_config_error(err, "spec.config.%s: expected a string, got %s", path,
                               wd_json_kind_name(v.kind));
    if (!(*out = wd_json_string(v, NULL))) return wd_internal_error(err, "out of memory");
    return true;
}

bool wd_config_bool(const wd_invocation *inv, const char *path, bool dflt, bool *out,
                    wd_error *err) {
    *out = dflt;
    wd_json v = wd_json_path(inv->config, path);
    if (v.kind == WD_JSON_MISSING || v.kind == WD_JSON_NULL) return true;
    if (!wd_json_bool(v, out))
        return wd_config_error(err, "spec.config.%s: expected a bool, got %s", path,
                               wd_json_kind_name(v.kind));
    return true;
}

/* Move an error the host returned into the plugin's *err. */
static bool host_error(wd_error *err, wd_error *from) {
    wd_error_clear(err);
    *err = *from;
    memset(from, 0, sizeof *from);
    return false;
}

bool wd_checkpoint(const char *name, wd_error *err) {
    wstr s = {(uint8_t *)name, strlen(name)};
    wd_error e;
    if (wasm_deployer_plugin_progress_checkpoint(&s, &e)) return true;
    return host_error(err, &e);
}

bool wd_remaining_millis(uint64_t *out) { return wasm_deployer_plugin_progress_remaining_millis(out); }

static wasm_deployer_plugin_kubernetes_object_ref_t object_ref(const char *api_version,
                                                               const char *kind,
                                                               const char *namespace_,
                                                               const char *name) {
    wasm_deployer_plugin_kubernetes_object_ref_t r; /* borrowed strings */
    r.api_version = (wstr){(uint8_t *)api_version, strlen(api_version)};
    r.kind = (wstr){(uint8_t *)kind, strlen(kind)};
    r.namespace_.is_some = namespace_ && *namespace_;
    r.namespace_.val = (wstr){(uint8_t *)namespace_, r.namespace_.is_some ? strlen(namespace_) : 0};
    r.name = (wstr){(uint8_t *)name, strlen(name)};
    return r;
}

/* An object the host returned: into *out (parsed), or freed if out is NULL. */
static bool host_object(wstr *s, wd_doc *out, const char *what, wd_error *err) {
    size_t n = 0;
    char *text = wstr_take(s, &n);
    if (!text) return wd_internal_error(err, "out of memory");
    if (!out) {
        free(text);
        return true;
    }
    if (!wd_doc_parse(out, text, n)) {
        wd_doc_free(out);
        return error_fill(err, WD_ERR_INTERNAL_PROBLEM, "InvalidHostResponse",
                          xstrdup(what)); /* never happens with this host */
    }
    return true;
}

bool wd_k8s_get(const char *api_version, const char *kind, const char *namespace_,
                const char *name, bool *found, wd_doc *out, wd_error *err) {
    wasm_deployer_plugin_kubernetes_object_ref_t r = object_ref(api_version, kind, namespace_, name);
    wd_wit_option_string_t ret;
    wd_error e;
    if (out) memset(out, 0, sizeof *out);
    *found = false;
    if (!wasm_deployer_plugin_kubernetes_get(&r, &ret, &e)) return host_error(err, &e);
    if (!ret.is_some) return true;
    *found = true;
    return host_object(&ret.val, out, "kubernetes get returned invalid JSON", err);
}

bool wd_k8s_create(const char *object_json, wd_doc *out, wd_error *err) {
    wstr obj = {(uint8_t *)object_json, strlen(object_json)}, ret;
    wd_error e;
    if (out) memset(out, 0, sizeof *out);
    if (!wasm_deployer_plugin_kubernetes_create(&obj, &ret, &e)) return host_error(err, &e);
    return host_object(&ret, out, "kubernetes create returned invalid JSON", err);
}

bool wd_k8s_update(const char *object_json, wd_doc *out, wd_error *err) {
    wstr obj = {(uint8_t *)object_json, strlen(object_json)}, ret;
    wd_error e;
    if (out) memset(out, 0, sizeof *out);
    if (!wasm_deployer_plugin_kubernetes_update(&obj, &ret, &e)) return host_error(err, &e);
    return host_object(&ret, out, "kubernetes update returned invalid JSON", err);
}

bool wd_k8s_delete(const char *api_version, const char *kind, const char *namespace_,
                   const char *name, bool *existed, wd_error *err) {
    wasm_deployer_plugin_kubernetes_object_ref_t r = object_ref(api_version, kind, namespace_, name);
    bool ret = false;
    wd_error e;
    if (!wasm_deployer_plugin_kubernetes_delete(&r, &ret, &e)) return host_error(err, &e);
    if (existed) *existed = ret;
    return true;
}

static void string_list(wd_wit_list_string_t *l, const char *const *items) {
    l->ptr = NULL;
    l->len = 0;
    for (size_t i = 0; items && items[i]; i++) {
        wstr *s = list_push((void **)&l->ptr, &l->len, sizeof *s);
        if (s) wstr_set(s, items[i]);
    }
}

void wd__describe(const wd_deployer_info *info, wasm_deployer_plugin_types_description_t *ret) {
    wstr_set(&ret->name, info->name);
    wstr_set(&ret->version, info->version);
    string_list(&ret->deploy_item_types, info->deploy_item_types);
    string_list(&ret->hook_types, info->hook_types);
}

bool wd__step(const char *operation, wd_step_fn fn, wasm_deployer_plugin_types_invocation_t *wi,
              wd_response *ret, wd_error *err) {
    memset(ret, 0, sizeof *ret); /* every option none, every list [] */
    memset(err, 0, sizeof *err);

    /* Take the invocation over (its strings become our NUL-terminated documents). */
    wd_invocation inv;
    memset(&inv, 0, sizeof inv);
    inv.operation = operation;
    wd_wit_option_string_t item = {true, wi->deploy_item};
    wi->deploy_item = (wstr){NULL, 0};
    doc_from_option(&inv.item, &item);
    if (wi->target.is_some) {
        wd_wit_option_string_t t = {true, wi->target.val.target};
        wd_wit_option_string_t c = {true, wi->target.val.content};
        wi->target.is_some = false;
        doc_from_option(&inv.target, &t);
        doc_from_option(&inv.target_content, &c);
    }
    doc_from_option(&inv.context, &wi->context);
    doc_from_option(&inv.previous_provider_status, &wi->previous_provider_status);
    wasm_deployer_plugin_types_invocation_free(wi); /* whatever is left (nothing, normally) */

    bool ok;
    char *name = NULL, *ns = NULL, *type = NULL, *phase = NULL;
    if (inv.item.root.kind != WD_JSON_OBJECT) {
        ok = error_fill(err, WD_ERR_INTERNAL_PROBLEM, "InvalidHostInput",
                        xstrdup("host sent a DeployItem that is not a JSON object"));
    } else {
        inv.config = wd_json_path(inv.item.root, "spec.config");
        inv.name = name = string_at(inv.item.root, "metadata.name");
        inv.namespace_ = ns = string_at(inv.item.root, "metadata.namespace");
        inv.type = type = string_at(inv.item.root, "spec.type");
        inv.phase = phase = string_at(inv.item.root, "status.phase");
        if (!name || !ns || !type || !phase) ok = wd_internal_error(err, "out of memory");
        else ok = fn(&inv, ret, err);
    }

    if (ok) {
        wd_error_clear(err); /* the plugin may have recovered from an error */
    } else {
        wasm_deployer_plugin_types_response_free(ret);
        memset(ret, 0, sizeof *ret);
        error_finish(err, operation);
    }
    free(name);
    free(ns);
    free(type);
    free(phase);
    wd_doc_free(&inv.item);
    wd_doc_free(&inv.target);
    wd_doc_free(&inv.target_content);
    wd_doc_free(&inv.context);
    wd_doc_free(&inv.previous_provider_status);
    return ok;
}

#endif /* WD_HAVE_DEPLOYER */

/* ==== hooks =============================================================================== */
#ifdef WD_HAVE_HOOKS

const char *wd_hook_type_name(wd_hook_type t) {
    static const char *const names[] = {
        "start", "during-responsibility-check", "after-responsibility-check",
        "should-reconcile", "before-any-reconcile", "before-abort", "before-force-reconcile",
        "before-delete", "before-reconcile", "end",
    };
    return t < sizeof names / sizeof names[0] ? names[t] : "hook";
}

void wd__hooks_describe(const wd_hook_info *info,
                        exports_wasm_deployer_plugin_hooks_hook_setup_t *ret) {
    wstr_set(&ret->name, info->name);
    wstr_set(&ret->version, info->version);
    ret->hook_types.ptr = NULL;
    ret->hook_types.len = 0;
    if (info->hook_types_len == 0) return;
    ret->hook_types.ptr = malloc(info->hook_types_len * sizeof *info->hook_types);
    if (!ret->hook_types.ptr) return;
    memcpy(ret->hook_types.ptr, info->hook_types, info->hook_types_len * sizeof *info->hook_types);
    ret->hook_types.len = info->hook_types_len;
}

bool wd__hooks_run(wd_hook_fn fn, exports_wasm_deployer_plugin_hooks_hook_input_t *wi,
                   exports_wasm_deployer_plugin_hooks_option_hook_result_t *ret, wd_error *err) {
    memset(ret, 0, sizeof *ret); /* none */
    memset(err, 0, sizeof *err);

    wd_hook_input in;
    memset(&in, 0, sizeof in);
    in.hook_type = wi->hook_type;
    doc_from_option(&in.item, &wi->deploy_item);
    doc_from_option(&in.target, &wi->target);
    exports_wasm_deployer_plugin_hooks_hook_input_free(wi);

    char *name = string_at(in.item.root, "metadata.name");
    char *ns = string_at(in.item.root, "metadata.namespace");
    in.name = name ? name : "";
    in.namespace_ = ns ? ns : "";
    in.annotations = wd_json_path(in.item.root, "metadata.annotations");

    wd_hook_result result;
    memset(&result, 0, sizeof result);
    bool ok = fn(&in, &result, err);
    if (ok) {
        wd_error_clear(err);
        ret->is_some = result.some;
        ret->val.abort_reconcile = result.abort_reconcile;
        ret->val.requeue = result.requeue;
        ret->val.requeue_after_ms.is_some = result.has_requeue_after_ms;
        ret->val.requeue_after_ms.val = result.requeue_after_ms;
    } else {
        error_finish(err, wd_hook_type_name(in.hook_type));
    }
    free(name);
    free(ns);
    wd_doc_free(&in.item);
    wd_doc_free(&in.target);
    return ok;
}

#endif /* WD_HAVE_HOOKS */
