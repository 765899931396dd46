// Package httpapi is the target-independent half of the SDK's HTTP support: the Target URL
// rules and the error mapping all five SDKs share (sdk-guest/src/http.rs is the reference).
// Standard library only and no WIT: `go test ./internal/httpapi` runs natively.
//
// The mapping (messages "<METHOD> <URL>: <status> <body, first 500 characters>"):
//   - 401, 403: ERR_UNAUTHORIZED, reason Unauthorized;
//   - other 4xx: ERR_CONFIGURATION_PROBLEM, reason HttpClientError;
//   - 5xx: retryable (no code), reason HttpServerError;
//   - no response (refused, timeout, reset, TLS, ...): retryable, reason HttpRequestFailed,
//     message "<METHOD> <URL>: wasi:http error <code> (<detail>)";
//   - refused by the host (HTTP-request-denied): ERR_CONFIGURATION_PROBLEM, reason HttpNotAllowed.
package httpapi

import (
	"encoding/json"
	"fmt"
	"strings"
)

// TargetType is the Target type that names an HTTP API (spec.config.url, caData, auth).
const TargetType = "wasm-deployer.dev/http-api"

// BodyInMessage is how many characters of a response body an error message quotes.
const BodyInMessage = 500

// RequestDenied is the wasi:http error-code case with which the host refuses a request.
const RequestDenied = "HTTP-request-denied"

// Problem is a mapped error: Code "" is retryable.
type Problem struct {
	Code, Reason, Message string
}

const (
	codeUnauthorized  = "ERR_UNAUTHORIZED"
	codeConfiguration = "ERR_CONFIGURATION_PROBLEM"
)

// Join joins base and a relative path with exactly one "/" ("" gives base).
func Join(base, path string) string {
	if path == "" {
		return base
	}
	return strings.TrimRight(base, "/") + "/" + strings.TrimLeft(path, "/")
}

// CheckRelativePath says what is wrong with path as a path under a base URL: an absolute URL,
// or a ".." segment (also percent-encoded). "" if it is fine.
func CheckRelativePath(path string) string {
	if strings.Contains(path, "://") || strings.HasPrefix(path, "//") {
		return fmt.Sprintf("path %q is an absolute URL; it must be relative to the Target's url", path)
	}
	beforeQuery := path
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		beforeQuery = path[:i]
	}
	for _, segment := range strings.FieldsFunc(beforeQuery, func(r rune) bool { return r == '/' || r == '\\' }) {
		if strings.ReplaceAll(strings.ToLower(segment), "%2e", ".") == ".." {
			return fmt.Sprintf("path %q contains \"..\"; it must stay under the Target's url", path)
		}
	}
	return ""
}

// TargetURL is spec.config.url of an http-api Target's content (JSON); on failure, the
// message of the ERR_CONFIGURATION_PROBLEM (reason TargetUrl).
func TargetURL(targetName string, content []byte) (string, string) {
	var config map[string]any
	if err := json.Unmarshal(content, &config); err != nil {
		return "", fmt.Sprintf("Target %q: its config is not a JSON object (%v)", targetName, err)
	}
	raw, found := config["url"]
	if !found {
		return "", fmt.Sprintf("Target %q has no url (spec.config.url)", targetName)
	}
	url, _ := raw.(string)
	url = strings.TrimSpace(url)
	if url == "" {
		return "", fmt.Sprintf("Target %q: spec.config.url must be a non-empty string", targetName)
	}
	lower := strings.ToLower(url)
	rest, ok := strings.CutPrefix(lower, "https://")
	if !ok {
		rest, ok = strings.CutPrefix(lower, "http://")
	}
	if !ok || rest == "" || strings.HasPrefix(rest, "/") {
		return "", fmt.Sprintf("Target %q: url %q is not an http:// or https:// URL", targetName, url)
	}
	return url, ""
}

// Status maps a response: nil for 1xx-3xx, the Problem for 4xx and 5xx.
func Status(method, url string, status int, body []byte) *Problem {
	message := func() string {
		text := strings.TrimSpace(strings.ToValidUTF8(string(body), "\uFFFD"))
		quoted := text
		if r := []rune(text); len(r) > BodyInMessage {
			quoted = string(r[:BodyInMessage]) + "..."
		}
		m := fmt.Sprintf("%s %s: %d", strings.ToUpper(method), url, status)
		if quoted != "" {
			m += " " + quoted
		}
		return m
	}
	switch {
	case status == 401 || status == 403:
		return &Problem{codeUnauthorized, "Unauthorized", message()}
	case status >= 400 && status <= 499:
		return &Problem{codeConfiguration, "HttpClientError", message()}
	case status >= 500 && status <= 599:
		return &Problem{"", "HttpServerError", message()}
	}
	return nil
}

// Transport maps a request that got no response: code is the wasi:http error-code case in its
// WIT spelling ("connection-refused", "HTTP-request-denied", ...), detail its payload ("" if none).
func Transport(method, url, code, detail string) Problem {
	method = strings.ToUpper(method)
	cause := "wasi:http error " + code
	if detail != "" {
		cause += " (" + detail + ")"
	}
	if code == RequestDenied {
		return Problem{codeConfiguration, "HttpNotAllowed", fmt.Sprintf(
			"%s %s: not allowed by the host (%s): a plugin may send requests only under its item's Target url or a prefix of the host's http.allow",
			method, url, cause)}
	}
	return Problem{"", "HttpRequestFailed", fmt.Sprintf("%s %s: %s", method, url, cause)}
}
