package httpapi

import (
	"strings"
	"testing"
)

func TestJoin(t *testing.T) {
	for _, base := range []string{"https://h/v1", "https://h/v1/"} {
		for _, path := range []string{"things/a", "/things/a"} {
			if got := Join(base, path); got != "https://h/v1/things/a" {
				t.Errorf("Join(%q, %q) = %q", base, path, got)
			}
		}
	}
	if got := Join("https://h/v1/", ""); got != "https://h/v1/" {
		t.Errorf("empty path: %q", got)
	}
}

func TestCheckRelativePath(t *testing.T) {
	for _, ok := range []string{"things/a", "/things/a", "a..b/c", "things?q=..", "x/.../y"} {
		if m := CheckRelativePath(ok); m != "" {
			t.Errorf("%q: %s", ok, m)
		}
	}
	for path, want := range map[string]string{
		"https://evil/x": "absolute URL",
		"//evil/x":       "absolute URL",
		"../x":           `contains ".."`,
		"a/%2E%2e/b":     `contains ".."`,
		`a\..\b`:         `contains ".."`,
	} {
		if m := CheckRelativePath(path); !strings.Contains(m, want) {
			t.Errorf("%q: %q does not say %q", path, m, want)
		}
	}
}

func TestTargetURL(t *testing.T) {
	if url, m := TargetURL("api", []byte(`{"url": " https://h/v1/ "}`)); url != "https://h/v1/" || m != "" {
		t.Errorf("got %q %q", url, m)
	}
	for content, want := range map[string]string{
		`{}`:                  "has no url",
		`{"url": 3}`:          "non-empty string",
		`{"url": "ftp://h"}`:  "not an http:// or https:// URL",
		`{"url": "https://"}`: "not an http:// or https:// URL",
		`nope`:                "not a JSON object",
	} {
		if _, m := TargetURL("api", []byte(content)); !strings.Contains(m, want) || !strings.Contains(m, `"api"`) {
			t.Errorf("%s: %q does not say %q", content, m, want)
		}
	}
}

func TestStatus(t *testing.T) {
	for status, want := range map[int]Problem{
		401: {codeUnauthorized, "Unauthorized", "PUT https://h/x: 401 nope"},
		403: {codeUnauthorized, "Unauthorized", "PUT https://h/x: 403 nope"},
		404: {codeConfiguration, "HttpClientError", "PUT https://h/x: 404 nope"},
		422: {codeConfiguration, "HttpClientError", "PUT https://h/x: 422 nope"},
		503: {"", "HttpServerError", "PUT https://h/x: 503 nope"},
	} {
		got := Status("put", "https://h/x", status, []byte(" nope\n"))
		if got == nil || *got != want {
			t.Errorf("%d: %+v", status, got)
		}
	}
	for _, status := range []int{200, 204, 302} {
		if got := Status("GET", "https://h/x", status, nil); got != nil {
			t.Errorf("%d: %+v", status, got)
		}
	}
	long := Status("GET", "https://h/x", 500, []byte(strings.Repeat("é", 600)))
	if !strings.HasSuffix(long.Message, strings.Repeat("é", BodyInMessage)+"...") {
		t.Errorf("long body: %q", long.Message)
	}
	if got := Status("GET", "https://h/x", 500, nil).Message; got != "GET https://h/x: 500" {
		t.Errorf("empty body: %q", got)
	}
}

func TestTransport(t *testing.T) {
	got := Transport("delete", "https://h/x", "connection-refused", "")
	if got != (Problem{"", "HttpRequestFailed", "DELETE https://h/x: wasi:http error connection-refused"}) {
		t.Errorf("%+v", got)
	}
	got = Transport("GET", "https://other/x", RequestDenied, "")
	if got.Code != codeConfiguration || got.Reason != "HttpNotAllowed" || !strings.Contains(got.Message, "https://other/x") {
		t.Errorf("%+v", got)
	}
	if got := Transport("GET", "https://h/x", "internal-error", "boom"); !strings.HasSuffix(got.Message, "internal-error (boom)") {
		t.Errorf("%+v", got)
	}
}
