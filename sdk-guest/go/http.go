package plugin

// HTTP requests to the API under the item's Target (WIT 1.5, `wasi:http/outgoing-handler`):
// the Target URL helpers and the shared error mapping. Sending is Go's own net/http client over
// wasi:http, in package wasm-deployer.dev/plugin/wasihttp (a separate package, so that plugins
// without HTTP do not link net/http):
//
//	url, err := inv.HTTPURL("things/a") // under the Target's url; ERR_CONFIGURATION_PROBLEM if not
//	if err != nil {
//		return nil, err
//	}
//	req, _ := http.NewRequest("PUT", url, bytes.NewReader(body))
//	req.Header.Set("Content-Type", "application/json")
//	resp, err := wasihttp.Client().Do(req) // transport errors: HttpRequestFailed / HttpNotAllowed
//	if err != nil {
//		return nil, err
//	}
//	answer, err := wasihttp.Check(resp) // 4xx / 5xx mapped; the body read and closed
//
// The host sends a request only if its URL lies under the item's Target url (or a prefix of its
// configuration's http.allow) and adds the Target's credentials (Authorization) itself: a
// plugin never sees a token. It does not follow redirects (Go's client does, each hop checked).

import (
	"wasm-deployer.dev/plugin/internal/httpapi"
)

// HTTPAPITargetType is the Target type that names an HTTP API (spec.config.url, optional
// caData and auth, whose secrets only the host reads).
const HTTPAPITargetType = httpapi.TargetType

// JoinURL joins base and a relative path with exactly one "/": "https://h/v1" or
// "https://h/v1/" with "things/a" or "/things/a" is "https://h/v1/things/a"; "" gives base.
func JoinURL(base, path string) string { return httpapi.Join(base, path) }

// CheckRelativePath fails (ERR_CONFIGURATION_PROBLEM, reason InvalidPath) if path is an
// absolute URL or has a ".." segment (also percent-encoded): it must stay under a base URL.
func CheckRelativePath(path string) error {
	if m := httpapi.CheckRelativePath(path); m != "" {
		return ConfigurationError("InvalidPath", "%s", m)
	}
	return nil
}

// HTTPTargetURL is spec.config.url of the item's Target, which must have type
// HTTPAPITargetType. ERR_CONFIGURATION_PROBLEM if there is no Target (reason NoTarget), it has
// another type (TargetType) or no valid url (TargetUrl).
func (inv *Invocation) HTTPTargetURL() (string, error) {
	if inv.Target == nil {
		return "", ConfigurationError("NoTarget",
			"no target defined: the DeployItem needs a Target of type %s", HTTPAPITargetType)
	}
	name := LookupString(inv.Target, "metadata", "name")
	if t := LookupString(inv.Target, "spec", "type"); t != HTTPAPITargetType {
		return "", ConfigurationError("TargetType",
			"Target %q has type %q; HTTP requests need a Target of type %q", name, t, HTTPAPITargetType)
	}
	url, problem := httpapi.TargetURL(name, inv.TargetContent)
	if problem != "" {
		return "", ConfigurationError("TargetUrl", "%s", problem)
	}
	return url, nil
}

// HTTPURL is JoinURL of the Target's url (HTTPTargetURL) and the relative path, checked by
// CheckRelativePath.
func (inv *Invocation) HTTPURL(path string) (string, error) {
	if err := CheckRelativePath(path); err != nil {
		return "", err
	}
	base, err := inv.HTTPTargetURL()
	if err != nil {
		return "", err
	}
	return JoinURL(base, path), nil
}

// HTTPStatusError maps a response status: nil for 1xx, 2xx and 3xx; for 401 and 403
// ERR_UNAUTHORIZED (reason Unauthorized), other 4xx ERR_CONFIGURATION_PROBLEM
// (HttpClientError), 5xx a retryable error (HttpServerError); the message is
// "<METHOD> <URL>: <status> <body, first 500 characters>".
func HTTPStatusError(method, url string, status int, body []byte) *Error {
	p := httpapi.Status(method, url, status, body)
	if p == nil {
		return nil
	}
	return NewError(p.Code, p.Reason, "%s", p.Message)
}

// HTTPTransportError maps a request that got no response; code is the wasi:http error-code
// case ("connection-refused", ...), detail its payload or "". HTTP-request-denied (the URL is
// not granted) is ERR_CONFIGURATION_PROBLEM, reason HttpNotAllowed; anything else retryable,
// reason HttpRequestFailed, message "<METHOD> <URL>: wasi:http error <code> (<detail>)".
func HTTPTransportError(method, url, code, detail string) *Error {
	p := httpapi.Transport(method, url, code, detail)
	return NewError(p.Code, p.Reason, "%s", p.Message)
}
