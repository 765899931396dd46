//! [`Ctx::http`] inside a component: one blocking request over `wasi:http/outgoing-handler`
//! (the `wasip2` crate's bindings), compiled only for `wasm32`.
//!
//! Owns: turning an [`HttpRequest`] into a `wasi:http` request, waiting for the response and
//! reading its body, and naming the `wasi:http` `error-code` of any failure on the way.
//! Must not touch: the error mapping (`crate::http`), credentials (the host adds them).
//!
//! [`Ctx::http`]: crate::Ctx::http

use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, IncomingBody, Method, OutgoingBody, OutgoingRequest, RequestOptions, Scheme,
};
use wasip2::io::streams::StreamError;

use crate::http::{HttpRequest, HttpResponse, TransportError};

/// `blocking-write-and-flush` takes at most 4096 bytes per call.
const WRITE_CHUNK: usize = 4096;
const READ_CHUNK: u64 = 64 * 1024;

pub(crate) fn http(request: &HttpRequest) -> Result<HttpResponse, TransportError> {
    let outgoing = outgoing_request(request)?;
    let body = outgoing
        .body()
        .map_err(|()| internal("the request's body was taken"))?;
    let options = options(request)?;
    let future = outgoing_handler::handle(outgoing, options).map_err(|e| from_code(&e))?;
    // The body goes out while the host sends the request; a failure of the exchange shows
    // up here too, and its error code is the response's.
    let written = write_body(body, &request.body);
    future.subscribe().block();
    let response = match future.get() {
        Some(Ok(Ok(_))) if written.is_err() => return Err(written.unwrap_err()),
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(code))) => return Err(from_code(&code)),
        Some(Err(())) => return Err(internal("the response was taken twice")),
        None => return Err(internal("no response although ready")),
    };
    let status = response.status();
    let headers = response
        .headers()
        .entries()
        .into_iter()
        .map(|(n, v)| {
            (
                n.to_ascii_lowercase(),
                String::from_utf8_lossy(&v).into_owned(),
            )
        })
        .collect();
    let incoming = response
        .consume()
        .map_err(|()| internal("the response body was taken"))?;
    let body = read_body(&incoming)?;
    drop(IncomingBody::finish(incoming));
    drop(response);
    Ok(HttpResponse {
        status,
        headers,
        body,
    })
}

fn outgoing_request(request: &HttpRequest) -> Result<OutgoingRequest, TransportError> {
    let (scheme, authority, path) = split_url(&request.url)?;
    let mut entries: Vec<(String, Vec<u8>)> = request
        .headers
        .iter()
        .map(|(n, v)| (n.clone(), v.clone().into_bytes()))
        .collect();
    let sends_body =
        !request.body.is_empty() || matches!(request.method.as_str(), "PUT" | "POST" | "PATCH");
    if sends_body && request.header_value("content-length").is_none() {
        entries.push((
            "content-length".into(),
            request.body.len().to_string().into_bytes(),
        ));
    }
    let headers = Fields::from_list(&entries).map_err(|e| {
        TransportError::new(
            "internal-error",
            Some(format!("invalid request header: {e:?}")),
        )
    })?;
    let outgoing = OutgoingRequest::new(headers);
    let invalid = |what: &str| {
        TransportError::new(
            "HTTP-request-URI-invalid",
            Some(format!("{what} of {}", request.url)),
        )
    };
    outgoing
        .set_method(&method(&request.method))
        .map_err(|()| {
            TransportError::new("HTTP-request-method-invalid", Some(request.method.clone()))
        })?;
    outgoing
        .set_scheme(Some(&scheme))
        .map_err(|()| invalid("scheme"))?;
    outgoing
        .set_authority(Some(authority))
        .map_err(|()| invalid("authority"))?;
    outgoing
        .set_path_with_query(Some(path))
        .map_err(|()| invalid("path"))?;
    Ok(outgoing)
}

/// `scheme://authority/path?query` (a fragment is dropped, an empty path is `/`).
fn split_url(url: &str) -> Result<(Scheme, &str, &str), TransportError> {
    let invalid = || TransportError::new("HTTP-request-URI-invalid", Some(url.to_string()));
    let (scheme, rest) = url.split_once("://").ok_or_else(invalid)?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "https" => Scheme::Https,
        "http" => Scheme::Http,
        _ => return Err(invalid()),
    };
    let rest = rest.split('#').next().unwrap_or_default();
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    if authority.is_empty() {
        return Err(invalid());
    }
    Ok((scheme, authority, if path.is_empty() { "/" } else { path }))
}

fn method(m: &str) -> Method {
    match m {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "CONNECT" => Method::Connect,
        "OPTIONS" => Method::Options,
        "TRACE" => Method::Trace,
        "PATCH" => Method::Patch,
        other => Method::Other(other.to_string()),
    }
}

fn options(request: &HttpRequest) -> Result<Option<RequestOptions>, TransportError> {
    let Some(timeout) = request.timeout else {
        return Ok(None);
    };
    let nanos = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
    let options = RequestOptions::new();
    options
        .set_connect_timeout(Some(nanos))
        .and_then(|()| options.set_first_byte_timeout(Some(nanos)))
        .map_err(|()| internal("the host does not take request timeouts"))?;
    Ok(Some(options))
}

fn write_body(body: OutgoingBody, bytes: &[u8]) -> Result<(), TransportError> {
    if !bytes.is_empty() {
        let stream = body
            .write()
            .map_err(|()| internal("the request body's stream was taken"))?;
        for chunk in bytes.chunks(WRITE_CHUNK) {
            stream
                .blocking_write_and_flush(chunk)
                .map_err(from_stream)?;
        }
        drop(stream);
    }
    OutgoingBody::finish(body, None).map_err(|e| from_code(&e))
}

fn read_body(body: &IncomingBody) -> Result<Vec<u8>, TransportError> {
    let stream = body
        .stream()
        .map_err(|()| internal("the response body's stream was taken"))?;
    let mut out = Vec::new();
    loop {
        match stream.blocking_read(READ_CHUNK) {
            Ok(chunk) => out.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break,
            Err(e) => return Err(from_stream(e)),
        }
    }
    drop(stream);
    Ok(out)
}

fn from_stream(e: StreamError) -> TransportError {
    match e {
        StreamError::Closed => TransportError::new("connection-terminated", None),
        StreamError::LastOperationFailed(io) => match wasip2::http::types::http_error_code(&io) {
            Some(code) => from_code(&code),
            None => TransportError::new("internal-error", Some(io.to_debug_string())),
        },
    }
}

fn internal(detail: &str) -> TransportError {
    TransportError::new("internal-error", Some(detail.to_string()))
}

/// The `error-code` case in its WIT spelling, with its payload.
fn from_code(code: &ErrorCode) -> TransportError {
    use ErrorCode as E;
    let some = |d: String| Some(d);
    let (name, detail) = match code {
        E::DnsTimeout => ("DNS-timeout", None),
        E::DnsError(p) => (
            "DNS-error",
            some(
                format!(
                    "{} {}",
                    p.rcode.as_deref().unwrap_or(""),
                    p.info_code.map(|c| c.to_string()).unwrap_or_default()
                )
                .trim()
                .to_string(),
            ),
        ),
        E::DestinationNotFound => ("destination-not-found", None),
        E::DestinationUnavailable => ("destination-unavailable", None),
        E::DestinationIpProhibited => ("destination-IP-prohibited", None),
        E::DestinationIpUnroutable => ("destination-IP-unroutable", None),
        E::ConnectionRefused => ("connection-refused", None),
        E::ConnectionTerminated => ("connection-terminated", None),
        E::ConnectionTimeout => ("connection-timeout", None),
        E::ConnectionReadTimeout => ("connection-read-timeout", None),
        E::ConnectionWriteTimeout => ("connection-write-timeout", None),
        E::ConnectionLimitReached => ("connection-limit-reached", None),
        E::TlsProtocolError => ("TLS-protocol-error", None),
        E::TlsCertificateError => ("TLS-certificate-error", None),
        E::TlsAlertReceived(p) => (
            "TLS-alert-received",
            p.alert_message
                .clone()
                .or(p.alert_id.map(|i| i.to_string())),
        ),
        E::HttpRequestDenied => (TransportError::REQUEST_DENIED, None),
        E::HttpRequestLengthRequired => ("HTTP-request-length-required", None),
        E::HttpRequestBodySize(n) => ("HTTP-request-body-size", n.map(|n| n.to_string())),
        E::HttpRequestMethodInvalid => ("HTTP-request-method-invalid", None),
        E::HttpRequestUriInvalid => ("HTTP-request-URI-invalid", None),
        E::HttpRequestUriTooLong => ("HTTP-request-URI-too-long", None),
        E::HttpRequestHeaderSectionSize(n) => {
            ("HTTP-request-header-section-size", n.map(|n| n.to_string()))
        }
        E::HttpRequestHeaderSize(p) => (
            "HTTP-request-header-size",
            p.as_ref().and_then(|p| p.field_name.clone()),
        ),
        E::HttpRequestTrailerSectionSize(n) => (
            "HTTP-request-trailer-section-size",
            n.map(|n| n.to_string()),
        ),
        E::HttpRequestTrailerSize(p) => ("HTTP-request-trailer-size", p.field_name.clone()),
        E::HttpResponseIncomplete => ("HTTP-response-incomplete", None),
        E::HttpResponseHeaderSectionSize(n) => (
            "HTTP-response-header-section-size",
            n.map(|n| n.to_string()),
        ),
        E::HttpResponseHeaderSize(p) => ("HTTP-response-header-size", p.field_name.clone()),
        E::HttpResponseBodySize(n) => ("HTTP-response-body-size", n.map(|n| n.to_string())),
        E::HttpResponseTrailerSectionSize(n) => (
            "HTTP-response-trailer-section-size",
            n.map(|n| n.to_string()),
        ),
        E::HttpResponseTrailerSize(p) => ("HTTP-response-trailer-size", p.field_name.clone()),
        E::HttpResponseTransferCoding(s) => ("HTTP-response-transfer-coding", s.clone()),
        E::HttpResponseContentCoding(s) => ("HTTP-response-content-coding", s.clone()),
        E::HttpResponseTimeout => ("HTTP-response-timeout", None),
        E::HttpUpgradeFailed => ("HTTP-upgrade-failed", None),
        E::HttpProtocolError => ("HTTP-protocol-error", None),
        E::LoopDetected => ("loop-detected", None),
        E::ConfigurationError => ("configuration-error", None),
        E::InternalError(s) => ("internal-error", s.clone()),
    };
    TransportError::new(name, detail.filter(|d| !d.is_empty()))
}
