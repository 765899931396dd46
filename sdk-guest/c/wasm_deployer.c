/*
 * wasm_deployer.c -- the C plugin helper (see wasm_deployer.h for the API and its rules).
 *
 * Owns: the JSON reader/writer, the WIT record builders and ownership rules, the glue between
 * the generated export functions and the plugin's callbacks, thin wrappers over the host
 * imports, and the blocking HTTP client over wasi:http with its error mapping. Must not: keep
 * state between calls (one instance serves one call), or touch anything the host owns
 * (status, timestamps, finalizers, export Secrets, HTTP credentials).
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

static char *format(const char *fmt, ...) __attribute__((__format__(printf, 1, 2)));
static char *format(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = vformat(fmt, ap);
    va_end(ap);
    return s;
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

/* ==== HTTP: URLs, responses and the error mapping (every world; no imports) ================ */

/* A growing byte buffer (always NUL-terminated once something was added). */
typedef struct {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sbuf_add(sbuf *b, const void *s, size_t n) {
    if (b->oom) return;
    if (n > SIZE_MAX - b->len - 1) {
        b->oom = true;
        return;
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) {
            if (cap > SIZE_MAX / 2) {
                b->oom = true;
                return;
            }
            cap *= 2;
        }
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}
static void sbuf_str(sbuf *b, const char *s) { sbuf_add(b, s, strlen(s)); }

/* The text (malloc'd; "" if nothing was added), or NULL on OOM. Resets the buffer. */
static char *sbuf_take(sbuf *b, size_t *len) {
    if (!b->oom && !b->p) sbuf_add(b, "", 0);
    char *p = b->oom ? NULL : b->p;
    if (!p) free(b->p);
    if (len) *len = p ? b->len : 0;
    memset(b, 0, sizeof *b);
    return p;
}

static bool ascii_ieq(const char *a, const char *b) {
    for (; *a && *b; a++, b++) {
        char x = *a >= 'A' && *a <= 'Z' ? (char)(*a + 32) : *a;
        char y = *b >= 'A' && *b <= 'Z' ? (char)(*b + 32) : *b;
        if (x != y) return false;
    }
    return *a == *b;
}

__attribute__((unused)) static bool ascii_istarts(const char *s, const char *prefix) {
    for (; *prefix; s++, prefix++) {
        char x = *s >= 'A' && *s <= 'Z' ? (char)(*s + 32) : *s;
        if (x != *prefix) return false; /* prefix is lower case; stops at the NUL of s */
    }
    return true;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Length of the valid UTF-8 sequence at s[0..n) (n > 0), or 0 if it is not valid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned char c = s[0];
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) need = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F; /* no surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    if (n < need || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < need; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return need;
}

/* At most `max_chars` characters of body[0..n), white space trimmed, as valid UTF-8 (invalid
 * bytes and NUL become U+FFFD, so it fits a WIT string and printf), "..." appended if cut. */
static void add_body_start(sbuf *b, const char *body, size_t n, size_t max_chars) {
    const unsigned char *s = (const unsigned char *)body, *end = s + n;
    while (s < end && is_space((char)*s)) s++;
    while (end > s && is_space((char)end[-1])) end--;
    size_t chars = 0;
    while (s < end) {
        if (chars == max_chars) {
            sbuf_str(b, "...");
            return;
        }
        size_t k = *s ? utf8_len(s, (size_t)(end - s)) : 0;
        if (k) sbuf_add(b, s, k);
        else sbuf_str(b, "\xEF\xBF\xBD");
        s += k ? k : 1;
        chars++;
    }
}

/* `method` upper-cased into b. */
static void add_method(sbuf *b, const char *method) {
    for (const char *m = method ? method : "GET"; *m; m++) {
        char c = *m >= 'a' && *m <= 'z' ? (char)(*m - 32) : *m;
        sbuf_add(b, &c, 1);
    }
}

void wd_http_response_free(wd_http_response *r) {
    for (size_t i = 0; i < r->n_headers; i++) {
        free((char *)r->headers[i].name);
        free((char *)r->headers[i].value);
    }
    free(r->headers);
    free(r->body);
    memset(r, 0, sizeof *r);
}

const char *wd_http_response_header(const wd_http_response *r, const char *name) {
    for (size_t i = 0; i < r->n_headers; i++)
        if (ascii_ieq(r->headers[i].name, name)) return r->headers[i].value;
    return NULL;
}

wd_json wd_http_response_json(const wd_http_response *r) {
    return r->body ? wd_json_parse(r->body, r->body_len) : MISSING;
}

bool wd_http_is_success(const wd_http_response *r) { return r->status >= 200 && r->status < 300; }

bool wd_http_status_error(const char *method, const char *url, uint16_t status, const void *body,
                          size_t body_len, wd_error *err) {
    const char *code, *reason;
    if (status == 401 || status == 403) {
        code = WD_ERR_UNAUTHORIZED;
        reason = "Unauthorized";
    } else if (status >= 400 && status <= 499) {
        code = WD_ERR_CONFIGURATION_PROBLEM;
        reason = "HttpClientError";
    } else if (status >= 500 && status <= 599) {
        code = NULL; /* retried */
        reason = "HttpServerError";
    } else {
        return true;
    }
    sbuf b = {0};
    char st[16];
    add_method(&b, method);
    sbuf_str(&b, " ");
    sbuf_str(&b, url ? url : "");
    snprintf(st, sizeof st, ": %u", (unsigned)status);
    sbuf_str(&b, st);
    size_t mark = b.len;
    sbuf_str(&b, " ");
    add_body_start(&b, body ? body : "", body ? body_len : 0, WD_HTTP_BODY_IN_MESSAGE);
    if (!b.oom && b.len == mark + 1) b.p[b.len = mark] = '\0'; /* empty body: no trailing space */
    return error_fill(err, code, reason, sbuf_take(&b, NULL));
}

bool wd_http_error_for_status(const char *method, const char *url, const wd_http_response *r,
                              wd_error *err) {
    return wd_http_status_error(method, url, r->status, r->body, r->body_len, err);
}

bool wd_http_transport_error(const char *method, const char *url, const char *code,
                             const char *detail, wd_error *err) {
    bool denied = code && strcmp(code, WD_HTTP_REQUEST_DENIED) == 0;
    sbuf b = {0};
    add_method(&b, method);
    sbuf_str(&b, " ");
    sbuf_str(&b, url ? url : "");
    sbuf_str(&b, denied ? ": not allowed by the host (wasi:http error " : ": wasi:http error ");
    sbuf_str(&b, code ? code : "internal-error");
    if (detail && *detail) {
        sbuf_str(&b, " (");
        add_body_start(&b, detail, strlen(detail), SIZE_MAX); /* valid UTF-8 */
        sbuf_str(&b, ")");
    }
    if (denied)
        sbuf_str(&b, "): a plugin may send requests only under its item's Target url or a prefix "
                     "of the host's http.allow");
    return error_fill(err, denied ? WD_ERR_CONFIGURATION_PROBLEM : NULL,
                      denied ? "HttpNotAllowed" : "HttpRequestFailed", sbuf_take(&b, NULL));
}

char *wd_http_join(const char *base, const char *path) {
    size_t bn = strlen(base);
    if (!path || !*path) return xstrdup(base);
    while (bn > 0 && base[bn - 1] == '/') bn--;
    while (*path == '/') path++;
    sbuf b = {0};
    sbuf_add(&b, base, bn);
    sbuf_str(&b, "/");
    sbuf_str(&b, path);
    return sbuf_take(&b, NULL);
}

/* Whether s[0..n) is ".." with each dot possibly written %2e / %2E. */
static bool is_dot_dot(const char *s, size_t n) {
    int dots = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] == '.') i++;
        else if (n - i >= 3 && s[i] == '%' && s[i + 1] == '2' && (s[i + 2] == 'e' || s[i + 2] == 'E')) i += 3;
        else return false;
        if (++dots > 2) return false;
    }
    return dots == 2;
}

bool wd_http_check_path(const char *path, wd_error *err) {
    if (!path) path = "";
    if (strstr(path, "://") || (path[0] == '/' && path[1] == '/'))
        return error_fill(err, WD_ERR_CONFIGURATION_PROBLEM, "InvalidPath",
                          format("path \"%s\" is an absolute URL; it must be relative to the "
                                 "Target's url", path));
    size_t end = strcspn(path, "?#"), start = 0;
    for (size_t i = 0; i <= end; i++) {
        if (i < end && path[i] != '/' && path[i] != '\\') continue;
        if (is_dot_dot(path + start, i - start))
            return error_fill(err, WD_ERR_CONFIGURATION_PROBLEM, "InvalidPath",
                              format("path \"%s\" contains \"..\"; it must stay under the "
                                     "Target's url", path));
        start = i + 1;
    }
    return true;
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


bool wd_target_url(const wd_invocation *inv, const char *path, char **out, wd_error *err) {
    *out = NULL;
    if (path && !wd_http_check_path(path, err)) return false;
    wd_json target = inv->target.root;
    if (target.kind != WD_JSON_OBJECT)
        return error_fill(err, WD_ERR_CONFIGURATION_PROBLEM, "NoTarget",
                          xstrdup("no target defined: the DeployItem needs a Target of type "
                                  WD_HTTP_API_TARGET_TYPE));
    bool ok = false;
    char *name = string_at(target, "metadata.name");
    char *type = string_at(target, "spec.type");
    char *url = NULL;
    wd_json config = inv->target_content.root, u = wd_json_member(config, "url");
    if (!name || !type) {
        wd_internal_error(err, "out of memory");
    } else if (strcmp(type, WD_HTTP_API_TARGET_TYPE) != 0) {
        error_fill(err, WD_ERR_CONFIGURATION_PROBLEM, "TargetType",
                   format("Target \"%s\" has type \"%s\"; HTTP requests need a Target of type "
                          "\"" WD_HTTP_API_TARGET_TYPE "\"", name, type));
    } else if (config.kind != WD_JSON_OBJECT) {
        error_fill(err, WD_ERR_CONFIGURATION_PROBLEM, "TargetUrl",
                   format("Target \"%s\": its config is not a JSON object", name));
    } else if (u.kind == WD_JSON_MISSING) {
        error_fill(err, WD_ERR_CONFIGURATION_PROBLEM, "TargetUrl",
                   format("Target \"%s\" has no url (spec.config.url)", name));
    } else if (!(url = wd_json_string(u, NULL))) {
        if (u.kind == WD_JSON_STRING) wd_internal_error(err, "out of memory");
        else error_fill(err, WD_ERR_CONFIGURATION_PROBLEM, "TargetUrl",
                        format("Target \"%s\": spec.config.url must be a non-empty string", name));
    } else {
        char *t = url, *e = url + strlen(url); /* trimmed in place */
        while (t < e && is_space(*t)) t++;
        while (e > t && is_space(e[-1])) *--e = '\0';
        const char *rest = ascii_istarts(t, "https://") ? t + 8 : ascii_istarts(t, "http://") ? t + 7 : NULL;
        if (!*t) {
            error_fill(err, WD_ERR_CONFIGURATION_PROBLEM, "TargetUrl",
                       format("Target \"%s\": spec.config.url must be a non-empty string", name));
        } else if (!rest || !*rest || *rest == '/') {
            error_fill(err, WD_ERR_CONFIGURATION_PROBLEM, "TargetUrl",
                       format("Target \"%s\": url \"%s\" is not an http:// or https:// URL", name, t));
        } else if (!(*out = wd_http_join(t, path))) {
            wd_internal_error(err, "out of memory");
        } else {
            ok = true;
        }
    }
    free(name);
    free(type);
    free(url);
    return ok;
}

#endif /* WD_HAVE_DEPLOYER */

/* ==== HTTP client over wasi:http/outgoing-handler (deployer worlds) ======================== */
#ifdef WD_HAVE_HTTP
/*
 * One blocking exchange: outgoing-request (headers from a list, method, scheme, authority,
 * path) -> handle -> write the body into outgoing-body's output-stream -> finish -> block on
 * the future-incoming-response's pollable -> status, headers -> read the incoming-body's
 * input-stream until closed. Resources are dropped children first (streams, pollables and
 * headers before the body/response/future they belong to), or the host traps.
 */

#define HTTP_WRITE_CHUNK 4096 /* blocking-write-and-flush takes at most 4096 bytes */
#define HTTP_READ_CHUNK 65536

typedef wasi_http_types_error_code_t http_code;

/* Why an exchange failed: a wasi:http error-code case (WIT spelling, static) and detail
 * (malloc'd or NULL). code NULL = out of memory. */
typedef struct {
    const char *code;
    char *detail;
} http_fail;

static bool fail_with(http_fail *f, const char *code, char *detail) {
    if (!f->code) { /* the first failure wins */
        f->code = code;
        f->detail = detail;
    } else {
        free(detail);
    }
    return false;
}

static const char *const HTTP_CODE_NAMES[] = {
    "DNS-timeout", "DNS-error", "destination-not-found", "destination-unavailable",
    "destination-IP-prohibited", "destination-IP-unroutable", "connection-refused",
    "connection-terminated", "connection-timeout", "connection-read-timeout",
    "connection-write-timeout", "connection-limit-reached", "TLS-protocol-error",
    "TLS-certificate-error", "TLS-alert-received", "HTTP-request-denied",
    "HTTP-request-length-required", "HTTP-request-body-size", "HTTP-request-method-invalid",
    "HTTP-request-URI-invalid", "HTTP-request-URI-too-long", "HTTP-request-header-section-size",
    "HTTP-request-header-size", "HTTP-request-trailer-section-size", "HTTP-request-trailer-size",
    "HTTP-response-incomplete", "HTTP-response-header-section-size", "HTTP-response-header-size",
    "HTTP-response-body-size", "HTTP-response-trailer-section-size", "HTTP-response-trailer-size",
    "HTTP-response-transfer-coding", "HTTP-response-content-coding", "HTTP-response-timeout",
    "HTTP-upgrade-failed", "HTTP-protocol-error", "loop-detected", "configuration-error",
    "internal-error",
};

static char *opt_str(const wd_wit_option_string_t *o) {
    if (!o->is_some || o->val.len == 0) return NULL;
    char *s = malloc(o->val.len + 1);
    if (s) {
        memcpy(s, o->val.ptr, o->val.len);
        s[o->val.len] = '\0';
    }
    return s;
}

static char *opt_num(bool is_some, uint64_t v) { return is_some ? format("%llu", (unsigned long long)v) : NULL; }

/* Record an error-code the host returned (and free its payload). */
static bool fail_code(http_fail *f, http_code *c) {
    const char *name = c->tag < sizeof HTTP_CODE_NAMES / sizeof *HTTP_CODE_NAMES
                           ? HTTP_CODE_NAMES[c->tag] : "internal-error";
    char *detail = NULL;
    switch (c->tag) {
    case WASI_HTTP_TYPES_ERROR_CODE_DNS_ERROR: {
        char *rcode = opt_str(&c->val.dns_error.rcode);
        const wd_wit_option_u16_t *info = &c->val.dns_error.info_code;
        if (rcode && info->is_some) detail = format("%s %u", rcode, (unsigned)info->val);
        else if (info->is_some) detail = format("%u", (unsigned)info->val);
        if (detail || !rcode) free(rcode);
        else detail = rcode;
        break;
    }
    case WASI_HTTP_TYPES_ERROR_CODE_TLS_ALERT_RECEIVED:
        detail = opt_str(&c->val.tls_alert_received.alert_message);
        if (!detail) detail = opt_num(c->val.tls_alert_received.alert_id.is_some,
                                      c->val.tls_alert_received.alert_id.val);
        break;
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_REQUEST_BODY_SIZE:
        detail = opt_num(c->val.http_request_body_size.is_some, c->val.http_request_body_size.val);
        break;
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_BODY_SIZE:
        detail = opt_num(c->val.http_response_body_size.is_some, c->val.http_response_body_size.val);
        break;
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_REQUEST_HEADER_SECTION_SIZE:
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_REQUEST_TRAILER_SECTION_SIZE:
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_HEADER_SECTION_SIZE:
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_TRAILER_SECTION_SIZE: {
        const wd_wit_option_u32_t *n = &c->val.http_request_header_section_size; /* same layout */
        if (c->tag == WASI_HTTP_TYPES_ERROR_CODE_HTTP_REQUEST_TRAILER_SECTION_SIZE)
            n = &c->val.http_request_trailer_section_size;
        else if (c->tag == WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_HEADER_SECTION_SIZE)
            n = &c->val.http_response_header_section_size;
        else if (c->tag == WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_TRAILER_SECTION_SIZE)
            n = &c->val.http_response_trailer_section_size;
        detail = opt_num(n->is_some, n->val);
        break;
    }
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_REQUEST_HEADER_SIZE:
        if (c->val.http_request_header_size.is_some)
            detail = opt_str(&c->val.http_request_header_size.val.field_name);
        break;
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_REQUEST_TRAILER_SIZE:
        detail = opt_str(&c->val.http_request_trailer_size.field_name);
        break;
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_HEADER_SIZE:
        detail = opt_str(&c->val.http_response_header_size.field_name);
        break;
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_TRAILER_SIZE:
        detail = opt_str(&c->val.http_response_trailer_size.field_name);
        break;
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_TRANSFER_CODING:
        detail = opt_str(&c->val.http_response_transfer_coding);
        break;
    case WASI_HTTP_TYPES_ERROR_CODE_HTTP_RESPONSE_CONTENT_CODING:
        detail = opt_str(&c->val.http_response_content_coding);
        break;
    case WASI_HTTP_TYPES_ERROR_CODE_INTERNAL_ERROR:
        detail = opt_str(&c->val.internal_error);
        break;
    default:
        break;
    }
    wasi_http_types_error_code_free(c);
    return fail_with(f, name, detail);
}

/* Record a stream error (and drop its io error). */
static bool fail_stream(http_fail *f, wasi_io_streams_stream_error_t *e) {
    if (e->tag == WASI_IO_STREAMS_STREAM_ERROR_CLOSED)
        return fail_with(f, "connection-terminated", NULL);
    wasi_io_error_own_error_t io = e->val.last_operation_failed;
    wasi_io_error_borrow_error_t bio = wasi_io_error_borrow_error(io);
    http_code c;
    bool known = wasi_http_types_http_error_code(bio, &c);
    if (known) {
        wasi_io_error_error_drop_own(io);
        return fail_code(f, &c);
    }
    wd_wit_string_t s;
    wasi_io_error_method_error_to_debug_string(bio, &s);
    wasi_io_error_error_drop_own(io);
    char *detail = wstr_take(&s, NULL);
    return fail_with(f, "internal-error", detail);
}

/* `scheme://authority/path?query` (views into url; a fragment is dropped, "" path is "/"). */
static bool split_url(const char *url, wasi_http_types_scheme_t *scheme, wd_wit_string_t *authority,
                      wd_wit_string_t *path) {
    const char *rest;
    memset(scheme, 0, sizeof *scheme);
    if (ascii_istarts(url, "https://")) {
        scheme->tag = WASI_HTTP_TYPES_SCHEME_HTTPS;
        rest = url + 8;
    } else if (ascii_istarts(url, "http://")) {
        scheme->tag = WASI_HTTP_TYPES_SCHEME_HTTP;
        rest = url + 7;
    } else {
        return false;
    }
    size_t end = strcspn(rest, "#");
    size_t a = strcspn(rest, "/?#");
    if (a == 0) return false;
    *authority = (wd_wit_string_t){(uint8_t *)rest, a};
    if (a == end) *path = (wd_wit_string_t){(uint8_t *)"/", 1};
    else *path = (wd_wit_string_t){(uint8_t *)rest + a, end - a};
    return true;
}

static wasi_http_types_method_t method_of(const char *m) {
    static const char *const names[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT",
                                        "OPTIONS", "TRACE", "PATCH"};
    wasi_http_types_method_t wm;
    memset(&wm, 0, sizeof wm);
    for (uint8_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strcmp(m, names[i]) == 0) {
            wm.tag = i;
            return wm;
        }
    wm.tag = WASI_HTTP_TYPES_METHOD_OTHER;
    wm.val.other = (wd_wit_string_t){(uint8_t *)m, strlen(m)}; /* borrowed */
    return wm;
}

/* Headers as a wasi:http `fields` (plus content-length when needed). */
static bool request_fields(const char *method, const wd_http_header *headers, size_t n_headers,
                           size_t body_len, wasi_http_types_own_fields_t *out, http_fail *f) {
    wasi_http_types_tuple2_field_name_field_value_t *entries = calloc(n_headers + 1, sizeof *entries);
    if (!entries) return false;
    size_t k = 0;
    bool has_length = false;
    for (size_t i = 0; i < n_headers; i++) {
        if (!headers[i].name || !headers[i].value) continue;
        entries[k].f0 = (wd_wit_string_t){(uint8_t *)headers[i].name, strlen(headers[i].name)};
        entries[k].f1 = (wasi_http_types_field_value_t){(uint8_t *)headers[i].value, strlen(headers[i].value)};
        k++;
        has_length |= ascii_ieq(headers[i].name, "content-length");
    }
    char length[24];
    bool sends_body = body_len > 0 || strcmp(method, "PUT") == 0 || strcmp(method, "POST") == 0 ||
                      strcmp(method, "PATCH") == 0;
    if (sends_body && !has_length) {
        snprintf(length, sizeof length, "%llu", (unsigned long long)body_len);
        entries[k].f0 = (wd_wit_string_t){(uint8_t *)"content-length", 14};
        entries[k].f1 = (wasi_http_types_field_value_t){(uint8_t *)length, strlen(length)};
        k++;
    }
    wasi_http_types_list_tuple2_field_name_field_value_t list = {entries, k};
    wasi_http_types_header_error_t herr;
    bool ok = wasi_http_types_static_fields_from_list(&list, out, &herr);
    free(entries); /* borrowed by the call: nothing of it was taken */
    if (!ok) {
        static const char *const why[] = {"invalid-syntax", "forbidden", "immutable"};
        return fail_with(f, "internal-error",
                         format("invalid request header (%s)", herr.tag < 3 ? why[herr.tag] : "?"));
    }
    return true;
}

/* Write the body (if any) and finish it; consumes `body`. */
static bool write_body(wasi_http_types_own_outgoing_body_t body, const void *data, size_t len,
                       http_fail *f) {
    if (len > 0) {
        wasi_http_types_own_output_stream_t stream;
        if (!wasi_http_types_method_outgoing_body_write(wasi_http_types_borrow_outgoing_body(body), &stream)) {
            wasi_http_types_outgoing_body_drop_own(body);
            return fail_with(f, "internal-error", xstrdup("the request body's stream was taken"));
        }
        wasi_io_streams_borrow_output_stream_t bs = wasi_io_streams_borrow_output_stream(stream);
        bool ok = true;
        for (size_t off = 0; ok && off < len; off += HTTP_WRITE_CHUNK) {
            size_t n = len - off < HTTP_WRITE_CHUNK ? len - off : HTTP_WRITE_CHUNK;
            wd_wit_list_u8_t chunk = {(uint8_t *)data + off, n}; /* borrowed */
            wasi_io_streams_stream_error_t se;
            if (!wasi_io_streams_method_output_stream_blocking_write_and_flush(bs, &chunk, &se))
                ok = fail_stream(f, &se);
        }
        wasi_io_streams_output_stream_drop_own(stream);
        if (!ok) {
            wasi_http_types_outgoing_body_drop_own(body); /* unfinished: the request is aborted */
            return false;
        }
    }
    http_code c;
    if (!wasi_http_types_static_outgoing_body_finish(body, NULL, &c)) return fail_code(f, &c);
    return true;
}

/* Headers (lower-cased names) and the whole body of `resp` into *out. */
static bool read_response(wasi_http_types_own_incoming_response_t resp, wd_http_response *out,
                          http_fail *f) {
    wasi_http_types_borrow_incoming_response_t br = wasi_http_types_borrow_incoming_response(resp);
    out->status = wasi_http_types_method_incoming_response_status(br);

    wasi_http_types_own_headers_t h = wasi_http_types_method_incoming_response_headers(br);
    wasi_http_types_list_tuple2_field_name_field_value_t entries;
    wasi_http_types_method_fields_entries(wasi_http_types_borrow_fields(h), &entries);
    wasi_http_types_fields_drop_own(h);
    bool ok = true;
    if (entries.len) {
        out->headers = calloc(entries.len, sizeof *out->headers);
        if (!out->headers) ok = false;
        for (size_t i = 0; ok && i < entries.len; i++) {
            char *name = malloc(entries.ptr[i].f0.len + 1);
            char *value = malloc(entries.ptr[i].f1.len + 1);
            if (!name || !value) {
                free(name);
                free(value);
                ok = false;
                break;
            }
            for (size_t j = 0; j < entries.ptr[i].f0.len; j++) {
                char c = (char)entries.ptr[i].f0.ptr[j];
                name[j] = c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
            }
            name[entries.ptr[i].f0.len] = '\0';
            if (entries.ptr[i].f1.len) memcpy(value, entries.ptr[i].f1.ptr, entries.ptr[i].f1.len);
            value[entries.ptr[i].f1.len] = '\0';
            out->headers[i] = (wd_http_header){name, value};
            out->n_headers = i + 1;
        }
    }
    wasi_http_types_list_tuple2_field_name_field_value_free(&entries);
    if (!ok) return false;

    wasi_http_types_own_incoming_body_t body;
    if (!wasi_http_types_method_incoming_response_consume(br, &body))
        return fail_with(f, "internal-error", xstrdup("the response body was taken"));
    wasi_http_types_own_input_stream_t stream;
    if (!wasi_http_types_method_incoming_body_stream(wasi_http_types_borrow_incoming_body(body), &stream)) {
        wasi_http_types_incoming_body_drop_own(body);
        return fail_with(f, "internal-error", xstrdup("the response body's stream was taken"));
    }
    wasi_io_streams_borrow_input_stream_t bs = wasi_io_streams_borrow_input_stream(stream);
    sbuf b = {0};
    for (;;) {
        wd_wit_list_u8_t chunk;
        wasi_io_streams_stream_error_t se;
        if (!wasi_io_streams_method_input_stream_blocking_read(bs, HTTP_READ_CHUNK, &chunk, &se)) {
            if (se.tag != WASI_IO_STREAMS_STREAM_ERROR_CLOSED) ok = fail_stream(f, &se);
            break; /* closed: the whole body is in */
        }
        sbuf_add(&b, chunk.ptr, chunk.len);
        if (chunk.len) free(chunk.ptr); /* an empty list's ptr is (void *)1: never free it */
        if (b.oom) break;
    }
    wasi_io_streams_input_stream_drop_own(stream);
    wasi_http_types_future_trailers_drop_own(wasi_http_types_static_incoming_body_finish(body));
    out->body = sbuf_take(&b, &out->body_len);
    return ok && out->body;
}

/* The exchange; false with *f filled (code NULL: out of memory). */
static bool http_exchange(const char *method, const char *url, const wd_http_header *headers,
                          size_t n_headers, const void *body, size_t body_len,
                          wd_http_response *out, http_fail *f) {
    wasi_http_types_scheme_t scheme;
    wd_wit_string_t authority, path;
    if (!split_url(url, &scheme, &authority, &path))
        return fail_with(f, "HTTP-request-URI-invalid", xstrdup("not an absolute http:// or https:// URL"));

    wasi_http_types_own_fields_t fields;
    if (!request_fields(method, headers, n_headers, body_len, &fields, f)) return false;
    wasi_http_types_own_outgoing_request_t req = wasi_http_types_constructor_outgoing_request(fields);
    wasi_http_types_borrow_outgoing_request_t breq = wasi_http_types_borrow_outgoing_request(req);
    wasi_http_types_method_t wm = method_of(method);
    bool ok = true;
    if (!wasi_http_types_method_outgoing_request_set_method(breq, &wm))
        ok = fail_with(f, "HTTP-request-method-invalid", xstrdup(method));
    else if (!wasi_http_types_method_outgoing_request_set_scheme(breq, &scheme) ||
             !wasi_http_types_method_outgoing_request_set_authority(breq, &authority) ||
             !wasi_http_types_method_outgoing_request_set_path_with_query(breq, &path))
        ok = fail_with(f, "HTTP-request-URI-invalid", NULL);
    wasi_http_types_own_outgoing_body_t obody;
    if (ok && !wasi_http_types_method_outgoing_request_body(breq, &obody))
        ok = fail_with(f, "internal-error", xstrdup("the request's body was taken"));
    if (!ok) {
        wasi_http_types_outgoing_request_drop_own(req);
        return false;
    }

    wasi_http_types_own_future_incoming_response_t future;
    http_code c;
    if (!wasi_http_outgoing_handler_handle(req, NULL, &future, &c)) { /* req is consumed */
        wasi_http_types_outgoing_body_drop_own(obody);
        return fail_code(f, &c);
    }
    /* The body goes out while the host sends the request; if the exchange fails, the
     * response's error code says why (it wins over the write error). */
    http_fail write_failure = {NULL, NULL};
    bool written = write_body(obody, body, body_len, &write_failure);

    wasi_http_types_borrow_future_incoming_response_t bf = wasi_http_types_borrow_future_incoming_response(future);
    wasi_io_poll_own_pollable_t ready = wasi_http_types_method_future_incoming_response_subscribe(bf);
    wasi_io_poll_method_pollable_block(wasi_io_poll_borrow_pollable(ready));
    wasi_io_poll_pollable_drop_own(ready);
    wasi_http_types_result_result_own_incoming_response_error_code_void_t got;
    if (!wasi_http_types_method_future_incoming_response_get(bf, &got))
        ok = fail_with(f, "internal-error", xstrdup("no response although ready"));
    else if (got.is_err)
        ok = fail_with(f, "internal-error", xstrdup("the response was taken twice"));
    else if (got.val.ok.is_err)
        ok = fail_code(f, &got.val.ok.val.err);
    if (ok && !written) {
        wasi_http_types_incoming_response_drop_own(got.val.ok.val.ok);
        ok = false;
    } else if (ok) {
        wasi_http_types_own_incoming_response_t resp = got.val.ok.val.ok;
        ok = read_response(resp, out, f);
        wasi_http_types_incoming_response_drop_own(resp);
    }
    wasi_http_types_future_incoming_response_drop_own(future);
    if (!ok && !f->code && write_failure.code) { /* no error code of the exchange: the write's */
        *f = write_failure;
        write_failure.detail = NULL;
    }
    free(write_failure.detail);
    return ok;
}

bool wd_http_request(const char *method, const char *url, const wd_http_header *headers,
                     size_t n_headers, const void *body, size_t body_len, wd_http_response *out,
                     wd_error *err) {
    memset(out, 0, sizeof *out);
    if (!url) url = "";
    sbuf m = {0};
    add_method(&m, method);
    char *upper = sbuf_take(&m, NULL);
    if (!upper) return wd_internal_error(err, "out of memory");
    http_fail f = {NULL, NULL};
    bool ok = http_exchange(upper, url, headers, n_headers, body, body ? body_len : 0, out, &f);
    if (!ok) {
        wd_http_response_free(out);
        if (f.code) wd_http_transport_error(upper, url, f.code, f.detail, err);
        else wd_internal_error(err, "%s %s: out of memory", upper, url);
    }
    free(f.detail);
    free(upper);
    return ok;
}

bool wd_http_send_json(const char *method, const char *url, const char *json,
                       wd_http_response *out, wd_error *err) {
    static const wd_http_header JSON_HEADERS[] = {{"Content-Type", "application/json"},
                                                  {"Accept", "application/json"}};
    if (!json) return wd_http_request(method, url, JSON_HEADERS + 1, 1, NULL, 0, out, err);
    return wd_http_request(method, url, JSON_HEADERS, 2, json, strlen(json), out, err);
}

#endif /* WD_HAVE_HTTP */

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
