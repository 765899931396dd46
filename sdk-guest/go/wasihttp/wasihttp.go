// Package wasihttp is Go's own net/http client over WASI 0.2's `wasi:http/outgoing-handler`
// (WIT 1.5), for deployer plugins (world deployer-plugin; hook worlds do not import wasi:http):
//
//	url, err := inv.HTTPURL(path) // under the item's Target url (package plugin)
//	if err != nil {
//		return nil, err
//	}
//	req, err := http.NewRequest("PUT", url, bytes.NewReader(body))
//	if err != nil {
//		return nil, plugin.ConfigurationError("InvalidRequest", "%v", err)
//	}
//	req.Header.Set("Content-Type", "application/json")
//	resp, err := wasihttp.Client().Do(req) // transport error: HttpRequestFailed or HttpNotAllowed
//	if err != nil {
//		return nil, err
//	}
//	answer, err := wasihttp.Check(resp) // reads and closes the body; 4xx and 5xx mapped
//
// The host sends only what its grant allows (URLs under the item's Target url, or a prefix of
// its http.allow) and adds the Target's credentials itself. It does not follow redirects;
// Go's client does, and each hop goes through this transport and the host's check.
//
// Errors of RoundTrip are *plugin.Error (so returning them keeps codes and reason): a request
// the host refuses (wasi:http HTTP-request-denied) is ERR_CONFIGURATION_PROBLEM, reason
// HttpNotAllowed; any other failure without a response (refused, timeout, reset, TLS, DNS)
// is retryable, reason HttpRequestFailed, message "<METHOD> <URL>: wasi:http error <code>".
//
// Go on wasip1 has one thread: a request blocks the plugin until it is answered (the host
// bounds it by the invocation's deadline). Read or close a response body before the step
// returns.
package wasihttp

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"wasm-deployer.dev/plugin"
	"wasm-deployer.dev/plugin/internal/wit"
)

// writeChunk is what `blocking-write-and-flush` takes at most per call.
const writeChunk = 4096

// readChunk is the most one `blocking-read` asks for.
const readChunk = 64 * 1024

// Transport is an http.RoundTripper over wasi:http. The zero value uses the host's timeouts.
type Transport struct {
	// Timeout, if set, is the connect and first-byte timeout of each request (the host
	// always cuts it to the invocation's deadline).
	Timeout time.Duration
}

// Client is an *http.Client whose requests go through wasi:http (a Transport with the host's
// timeouts). Redirects are followed by Go's client, each hop checked by the host.
func Client() *http.Client { return &http.Client{Transport: &Transport{}} }

// Check reads and closes resp's body; for 4xx and 5xx it returns the mapped *plugin.Error
// (plugin.HTTPStatusError: 401/403 ERR_UNAUTHORIZED, other 4xx ERR_CONFIGURATION_PROBLEM,
// 5xx retryable), naming the request's method and URL; else the body.
func Check(resp *http.Response) ([]byte, error) {
	method, url := "GET", ""
	if resp.Request != nil {
		method, url = resp.Request.Method, resp.Request.URL.String()
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if e := plugin.HTTPStatusError(method, url, resp.StatusCode, body); e != nil {
		return body, e
	}
	if err != nil {
		return body, plugin.RetryableError("HttpRequestFailed", "%s %s: reading the response: %v", method, url, err)
	}
	return body, nil
}

// RoundTrip sends req through wasi:http and returns the response with its body streaming
// from the host.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	url := req.URL.String()
	fail := func(reason, format string, args ...any) (*http.Response, error) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, plugin.NewError(plugin.ErrConfigurationProblem, reason, "%s %s: %s", method, url, fmt.Sprintf(format, args...))
	}
	outReq, problem := newRequest(method, req)
	if problem != "" {
		return fail("HttpInvalidRequest", "%s", problem)
	}
	outBody := outReq.Body()
	var options *wit.HttpRequestOptions
	if t.Timeout > 0 {
		o := wit.NewHttpRequestOptions()
		ns := uint64(t.Timeout.Nanoseconds())
		o.SetConnectTimeout(&ns)
		o.SetFirstByteTimeout(&ns)
		options = &o
	}
	future := wit.HttpOutgoingHandlerHandle(outReq, options) // takes outReq and options
	if future.IsErr {
		if !outBody.IsErr {
			outBody.Ok.Drop()
		}
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, transportError(method, url, future.Err)
	}
	if outBody.IsErr {
		future.Ok.Drop()
		return fail("HttpInvalidRequest", "wasi:http gave no request body")
	}
	if err := sendBody(outBody.Ok, req.Body); err != nil {
		future.Ok.Drop()
		return nil, plugin.RetryableError("HttpRequestFailed", "%s %s: sending the body: %v", method, url, err)
	}
	incoming, errCode, problem := await(future.Ok)
	if errCode != nil {
		return nil, transportError(method, url, *errCode)
	}
	if problem != "" {
		return nil, plugin.RetryableError("HttpRequestFailed", "%s %s: %s", method, url, problem)
	}
	return response(req, incoming), nil
}

// newRequest makes the wasi:http request: headers, method, scheme, authority, path.
func newRequest(method string, req *http.Request) (wit.HttpOutgoingRequest, string) {
	names := make([]string, 0, len(req.Header))
	for name := range req.Header {
		names = append(names, name)
	}
	sort.Strings(names)
	var entries []wit.Tuple2[string, []byte]
	hasLength := false
	for _, name := range names {
		lower := strings.ToLower(name)
		hasLength = hasLength || lower == "content-length"
		for _, v := range req.Header[name] {
			entries = append(entries, wit.Tuple2[string, []byte]{F0: lower, F1: []byte(v)})
		}
	}
	sendsBody := (req.Body != nil && req.Body != http.NoBody) ||
		method == http.MethodPut || method == http.MethodPost || method == http.MethodPatch
	if sendsBody && !hasLength && req.ContentLength >= 0 {
		entries = append(entries, wit.Tuple2[string, []byte]{F0: "content-length", F1: []byte(strconv.FormatInt(req.ContentLength, 10))})
	}
	fields := wit.HttpFieldsFromList(entries)
	if fields.IsErr {
		return 0, "a header wasi:http does not accept (" + fields.Err.Case() + ")"
	}
	out := wit.NewHttpOutgoingRequest(fields.Ok) // takes the fields
	var scheme wit.HttpScheme
	switch strings.ToLower(req.URL.Scheme) {
	case "http":
		scheme.Tag = wit.HttpSchemeHTTP
	case "https":
		scheme.Tag = wit.HttpSchemeHTTPS
	default:
		out.Drop()
		return 0, fmt.Sprintf("scheme %q: only http and https", req.URL.Scheme)
	}
	authority, path := req.URL.Host, req.URL.RequestURI()
	switch {
	case out.SetMethod(methodOf(method)).IsErr:
		out.Drop()
		return 0, fmt.Sprintf("method %q is not valid", method)
	case out.SetScheme(&scheme).IsErr, out.SetAuthority(&authority).IsErr, out.SetPathWithQuery(&path).IsErr:
		out.Drop()
		return 0, "not a valid URL for wasi:http"
	}
	return out, ""
}

func methodOf(m string) wit.HttpMethod {
	cases := map[string]uint8{
		"GET": wit.HttpMethodGet, "HEAD": wit.HttpMethodHead, "POST": wit.HttpMethodPost,
		"PUT": wit.HttpMethodPut, "DELETE": wit.HttpMethodDelete, "CONNECT": wit.HttpMethodConnect,
		"OPTIONS": wit.HttpMethodOptions, "TRACE": wit.HttpMethodTrace, "PATCH": wit.HttpMethodPatch,
	}
	if tag, ok := cases[m]; ok {
		return wit.HttpMethod{Tag: tag}
	}
	return wit.HttpMethod{Tag: wit.HttpMethodOther, Other: m}
}

// sendBody writes body (may be nil) to the request's body stream and finishes it.
func sendBody(out wit.HttpOutgoingBody, body io.ReadCloser) error {
	if body != nil && body != http.NoBody {
		defer body.Close()
		stream := out.Write()
		if stream.IsErr {
			out.Drop()
			return fmt.Errorf("wasi:http gave no body stream")
		}
		buf := make([]byte, writeChunk)
		for {
			n, err := body.Read(buf)
			if n > 0 {
				if w := stream.Ok.BlockingWriteAndFlush(buf[:n]); w.IsErr {
					stream.Ok.Drop()
					out.Drop()
					return streamError(w.Err)
				}
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				stream.Ok.Drop()
				out.Drop()
				return fmt.Errorf("reading the request body: %w", err)
			}
		}
		stream.Ok.Drop() // a child of the body: before finish
	}
	if fin := wit.HttpOutgoingBodyFinish(out, nil); fin.IsErr {
		return fmt.Errorf("wasi:http error %s", fin.Err.Case())
	}
	return nil
}

// await blocks until the response is there: the response, or the wasi:http error code, or a
// problem of another kind.
func await(future wit.HttpFutureIncomingResponse) (wit.HttpIncomingResponse, *wit.HttpErrorCode, string) {
	defer future.Drop()
	for {
		got := future.Get()
		if got == nil {
			pollable := future.Subscribe()
			pollable.Block()
			pollable.Drop()
			continue
		}
		switch {
		case got.IsErr:
			return 0, nil, "wasi:http: the response was taken already"
		case got.Ok.IsErr:
			return 0, &got.Ok.Err, ""
		}
		return got.Ok.Ok, nil, ""
	}
}

// response turns the wasi:http response into an *http.Response whose Body streams.
func response(req *http.Request, in wit.HttpIncomingResponse) *http.Response {
	status := int(in.Status())
	headers := in.Headers()
	header := http.Header{}
	for _, e := range headers.Entries() {
		header.Add(e.F0, string(e.F1))
	}
	headers.Drop() // a child of the response
	body := &bodyReader{response: in, method: req.Method, url: req.URL.String()}
	if consumed := in.Consume(); !consumed.IsErr {
		body.body = consumed.Ok
		if s := consumed.Ok.Stream(); !s.IsErr {
			body.stream, body.open = s.Ok, true
		}
	}
	length := int64(-1)
	if n, err := strconv.ParseInt(header.Get("Content-Length"), 10, 64); err == nil {
		length = n
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", status, http.StatusText(status)),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        header,
		Body:          body,
		ContentLength: length,
		Request:       req,
	}
}

// bodyReader reads a response body from its wasi:io input stream; Close drops the stream,
// the body and the response (children first).
type bodyReader struct {
	response    wit.HttpIncomingResponse
	body        wit.HttpIncomingBody
	stream      wit.IoInputStream
	open, done  bool
	method, url string
}

func (b *bodyReader) Read(p []byte) (int, error) {
	if !b.open || b.done {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	n := min(len(p), readChunk)
	for {
		r := b.stream.BlockingRead(uint64(n))
		if r.IsErr {
			b.done = true
			if r.Err.Tag == wit.IoStreamErrorClosed {
				return 0, io.EOF
			}
			return 0, plugin.RetryableError("HttpRequestFailed", "%s %s: reading the response: %v", b.method, b.url, streamError(r.Err))
		}
		if len(r.Ok) > 0 {
			return copy(p, r.Ok), nil
		}
	}
}

func (b *bodyReader) Close() error {
	if b.open {
		b.stream.Drop()
		b.body.Drop()
		b.open = false
	}
	if b.response != 0 {
		b.response.Drop()
		b.response = 0
	}
	return nil
}

// streamError is a wasi:io stream error as text (the last operation's error, with its
// wasi:http error code if it has one).
func streamError(e wit.IoStreamError) error {
	if e.Tag == wit.IoStreamErrorClosed {
		return fmt.Errorf("stream closed")
	}
	defer e.LastOperationFailed.Drop()
	if code := wit.HttpTypesHttpErrorCode(e.LastOperationFailed); code != nil {
		return fmt.Errorf("wasi:http error %s", code.Case())
	}
	return fmt.Errorf("%s", e.LastOperationFailed.ToDebugString())
}

// transportError maps a wasi:http error code (no response) to the SDK's error.
func transportError(method, url string, e wit.HttpErrorCode) error {
	return plugin.HTTPTransportError(method, url, e.Case(), detail(e))
}

// detail is the payload of the error codes that carry one worth reading.
func detail(e wit.HttpErrorCode) string {
	switch e.Tag {
	case wit.HttpErrorCodeDNSError:
		parts := []string{}
		if e.DNSError.Rcode != nil {
			parts = append(parts, "rcode "+*e.DNSError.Rcode)
		}
		if e.DNSError.InfoCode != nil {
			parts = append(parts, fmt.Sprintf("info-code %d", *e.DNSError.InfoCode))
		}
		return strings.Join(parts, ", ")
	case wit.HttpErrorCodeTLSAlertReceived:
		if e.TLSAlertReceived.AlertMessage != nil {
			return *e.TLSAlertReceived.AlertMessage
		}
	case wit.HttpErrorCodeInternalError:
		if e.InternalError != nil {
			return *e.InternalError
		}
	case wit.HttpErrorCodeHTTPResponseBodySize:
		if e.HTTPResponseBodySize != nil {
			return fmt.Sprintf("%d bytes", *e.HTTPResponseBodySize)
		}
	}
	return ""
}
