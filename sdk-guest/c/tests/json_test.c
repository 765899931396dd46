/*
 * Native unit test of the helper's JSON reader and writer (no wasm, no host), run under
 * AddressSanitizer/UBSan:
 *
 *   target/debug/c-componentize bindgen --wit wit --world deployer-plugin --out /tmp/wd-gen --rename-world wd_wit
 *   clang -std=c11 -g -fsanitize=address,undefined -no-pie -I /tmp/wd-gen -I sdk-guest/c \
 *       -Wl,--unresolved-symbols=ignore-all -o /tmp/json_test sdk-guest/c/tests/json_test.c && /tmp/json_test
 *
 * The WIT imports stay unresolved: the JSON code never calls them.
 */
#include "../wasm_deployer.c"

#include <assert.h>

static wd_json P(const char *s) { return wd_json_parse(s, strlen(s)); }

static void check_str(wd_json v, const char *want) {
    size_t n;
    char *s = wd_json_string(v, &n);
    assert(s && n == strlen(want) && memcmp(s, want, n) == 0);
    free(s);
}

int main(void) {
    /* syntax */
    const char *bad[] = {"", " ", "{", "[1,]", "{\"a\":}", "{\"a\" 1}", "01", "1.", "-", "tru",
                         "\"a", "\"\\x\"", "\"\\u12g4\"", "{} {}", "[\"\x01\"]", "{1:2}", NULL};
    for (int i = 0; bad[i]; i++) assert(P(bad[i]).kind == WD_JSON_MISSING);
    char deep[200];
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    assert(wd_json_parse(deep, 200).kind == WD_JSON_MISSING); /* > WD_JSON_MAX_DEPTH */
    assert(wd_json_parse(deep + 36, 128).kind == WD_JSON_ARRAY); /* depth 64 */
    assert(P(" -1.5e+3 ").kind == WD_JSON_NUMBER && P("null").kind == WD_JSON_NULL);

    /* lookups */
    wd_json doc = P("{\"metadata\":{\"name\":\"hello\",\"annotations\":{\"a.b/c\":\"true\"}},"
                    "\"spec\":{\"config\":{\"message\":\"hi \\\"you\\\" \\u00e9\\ud83d\\ude00\\n\","
                    "\"crash\":true,\"n\":[1,{\"x\":2},\"s\"]}},\"k\\u0065y\":1}");
    assert(doc.kind == WD_JSON_OBJECT);
    check_str(wd_json_path(doc, "metadata.name"), "hello");
    check_str(wd_json_path(doc, "spec.config.message"), "hi \"you\" \xc3\xa9\xf0\x9f\x98\x80\n");
    bool b = false;
    assert(wd_json_bool(wd_json_path(doc, "spec.config.crash"), &b) && b);
    assert(wd_json_path(doc, "spec.config.nope").kind == WD_JSON_MISSING);
    assert(wd_json_path(doc, "spec.config.message.x").kind == WD_JSON_MISSING);
    assert(wd_json_string_eq(wd_json_member(wd_json_path(doc, "metadata.annotations"), "a.b/c"), "true"));
    assert(wd_json_path(doc, "key").kind == WD_JSON_NUMBER); /* escaped key */
    wd_json arr = wd_json_path(doc, "spec.config.n");
    assert(wd_json_index(arr, 1).kind == WD_JSON_OBJECT && wd_json_index(arr, 3).kind == WD_JSON_MISSING);
    assert(wd_json_string_eq(wd_json_index(arr, 2), "s"));
    check_str(P("\"\\ud800x\""), "\xef\xbf\xbdx"); /* lone surrogate -> U+FFFD */
    assert(wd_json_member(P("[1]"), "a").kind == WD_JSON_MISSING);

    /* writer */
    wd_jw w;
    wd_jw_init(&w);
    wd_jw_begin_object(&w);
    wd_jw_kv_string(&w, "s", "a\"b\\c\n\x01 \xc3\xa9");
    wd_jw_key(&w, "arr");
    wd_jw_begin_array(&w);
    wd_jw_int(&w, -42);
    wd_jw_bool(&w, false);
    wd_jw_null(&w);
    wd_jw_value(&w, wd_json_index(arr, 1));
    wd_jw_end_array(&w);
    wd_jw_end_object(&w);
    char *out = wd_jw_finish(&w);
    assert(out && strcmp(out, "{\"s\":\"a\\\"b\\\\c\\n\\u0001 \xc3\xa9\",\"arr\":[-42,false,null,{\"x\":2}]}") == 0);
    check_str(wd_json_member(P(out), "s"), "a\"b\\c\n\x01 \xc3\xa9"); /* round trip */
    free(out);
    wd_jw_begin_object(&w);
    wd_jw_string(&w, "value without key");
    assert(wd_jw_finish(&w) == NULL);
    wd_jw_begin_object(&w); /* unclosed */
    assert(wd_jw_finish(&w) == NULL);

    /* with_member */
    out = wd_json_with_member(P("{\"a\":1,\"data\":{\"x\":1},\"b\":2}"), "data", "{\"message\":\"m\"}");
    assert(out && strcmp(out, "{\"a\":1,\"data\":{\"message\":\"m\"},\"b\":2}") == 0);
    free(out);
    out = wd_json_with_member(P("{}"), "data", "[]");
    assert(out && strcmp(out, "{\"data\":[]}") == 0);
    free(out);
    assert(wd_json_with_member(P("{}"), "data", "{") == NULL);
    puts("json_test: ok");
    return 0;
}
