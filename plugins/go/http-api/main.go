// go-http-api: the example http-api deployer in Go (world `deployer-plugin`), the same as
// `plugins/<lang>/http-api` and the `plugin new --lang go --template http-api` template.
//
// With a Target of type `wasm-deployer.dev/http-api` (`spec.config.url`), a DeployItem
// `spec.config = {"path": "things/a", "body": {...}}`:
//   - reconcile: `PUT <url>/<path>` with `body` as JSON; 2xx -> Succeeded, exports
//     `{"status": <code>, "body": <the JSON answer, or null>}`;
//   - delete: `DELETE <url>/<path>`; 2xx or 404 -> done.
//
// Requests go through Go's own net/http client over wasi:http (package wasihttp). Other
// answers and failures follow the SDK's mapping: 401/403 ERR_UNAUTHORIZED, other 4xx
// ERR_CONFIGURATION_PROBLEM, 5xx and transport failures retried. The host adds the Target's
// credentials; the plugin never sees them. Build: `plugins/go/build.sh OUT_DIR`.
package main

import (
	"bytes"
	"encoding/json"
	"net/http"

	"wasm-deployer.dev/plugin"
	"wasm-deployer.dev/plugin/deployer"
	"wasm-deployer.dev/plugin/wasihttp"
)

type httpAPI struct{}

func (httpAPI) Describe() plugin.Description {
	return plugin.Description{
		Name:            "go-http-api",
		Version:         "0.1.0",
		DeployItemTypes: []string{"example.wasm-deployer.dev/go-http-api"},
	}
}

// config is spec.config: path (relative to the Target's url; checked by HTTPURL) and body.
func config(inv *plugin.Invocation) (string, any, error) {
	c, err := inv.Config() // ERR_CONFIGURATION_PROBLEM if missing
	if err != nil {
		return "", nil, err
	}
	raw, found := c["path"]
	if !found {
		return "", nil, plugin.ConfigurationError("InvalidPath", "spec.config.path is missing (the API path under the Target's url)")
	}
	path, ok := raw.(string)
	if !ok || path == "" {
		return "", nil, plugin.ConfigurationError("InvalidPath", "spec.config.path must be a non-empty string")
	}
	return path, c["body"], nil
}

// send makes one request with Go's client (redirects followed, each hop checked by the host)
// and maps transport errors and 4xx/5xx; ok404 lets a 404 through.
func send(ctx *plugin.Ctx, method, url string, body []byte, ok404 bool) (int, []byte, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, plugin.ConfigurationError("InvalidPath", "%s %s: %v", method, url, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
	}
	ctx.Infof("http-api: %s %s", method, url)
	resp, err := wasihttp.Client().Do(req) // HttpRequestFailed (retried) or HttpNotAllowed
	if err != nil {
		return 0, nil, err
	}
	if ok404 && resp.StatusCode == http.StatusNotFound {
		resp.Body.Close()
		return resp.StatusCode, nil, nil
	}
	answer, err := wasihttp.Check(resp) // 401/403, other 4xx, 5xx mapped
	if err != nil {
		return 0, nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return 0, nil, plugin.ConfigurationError("HttpRedirect",
			"%s %s: %d redirect to %q (not followed: point the Target's url at the final location)",
			method, url, resp.StatusCode, resp.Header.Get("Location"))
	}
	return resp.StatusCode, answer, nil
}

func (httpAPI) Reconcile(ctx *plugin.Ctx, inv *plugin.Invocation) (*plugin.Response, error) {
	path, body, err := config(inv)
	if err != nil {
		return nil, err
	}
	url, err := inv.HTTPURL(path) // under the Target's url; ERR_CONFIGURATION_PROBLEM if not
	if err != nil {
		return nil, err
	}
	payload, err := json.Marshal(body)
	if err != nil {
		return nil, plugin.ConfigurationError("", "spec.config.body: %v", err)
	}
	status, answer, err := send(ctx, http.MethodPut, url, payload, false)
	if err != nil {
		return nil, err
	}
	var exported any // null if empty or not JSON
	if json.Unmarshal(answer, &exported) != nil {
		exported = nil
	}
	return &plugin.Response{
		Phase:   plugin.PhaseSucceeded,
		Exports: map[string]any{"status": status, "body": exported},
	}, nil
}

func (httpAPI) Delete(ctx *plugin.Ctx, inv *plugin.Invocation) (*plugin.Response, error) {
	path, _, err := config(inv)
	if err != nil {
		return nil, err
	}
	url, err := inv.HTTPURL(path)
	if err != nil {
		return nil, err
	}
	status, _, err := send(ctx, http.MethodDelete, url, nil, true)
	if err != nil {
		return nil, err
	}
	if status == http.StatusNotFound {
		ctx.Infof("http-api: %s was already gone", url)
	}
	return &plugin.Response{}, nil
}

func init() { deployer.Export(httpAPI{}) }

func main() {}
