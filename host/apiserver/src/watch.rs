//! Watch streams: newline-delimited `{"type","object"}` events over a chunked
//! HTTP body. Replays retained history after `resourceVersion` (or synthetic
//! ADDED events for rv ""/"0" and `sendInitialEvents=true`, the latter closed
//! by a BOOKMARK annotated `k8s.io/initial-events-end`), then live events
//! from the store's broadcast, filtered per watcher by namespace and
//! selectors (objects moving in/out of a selector become ADDED/DELETED).
//! A watcher that falls behind the broadcast buffer catches up from the
//! history ring. A too-old rv (older than the ring) gets an ERROR event with
//! a 410 `Expired` Status. Streams end at `timeoutSeconds`.

use crate::ApiServer;
use crate::registry::ResourceType;
use crate::selectors::Selector;
use crate::status::{ApiError, bytes_response};
use crate::store::{Event, EventType, Obj, partial_metadata};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;

/// Parsed watch parameters.
#[derive(Debug, Clone)]
pub struct WatchParams {
    pub resource_version: Option<String>,
    pub timeout: Option<Duration>,
    pub bookmarks: bool,
    pub send_initial_events: bool,
    pub meta_only: bool,
    /// Rows of a `Table` instead of objects (`as=Table`): the `includeObject` setting.
    pub table: Option<String>,
    pub ns: Option<String>,
    pub selector: Selector,
    /// Objects are shown through this view (with this apiVersion): events.k8s.io Events.
    pub view: Option<(crate::views::View, String)>,
}

struct Filter {
    key: String,
    ns: Option<String>,
    selector: Selector,
    meta_only: bool,
    api_version: String,
    kind: String,
    /// `as=Table`: the resource, the version and `includeObject`.
    table: Option<(Arc<ResourceType>, String, String)>,
    view: Option<crate::views::View>,
}

impl Filter {
    /// The event's object as a one-row `Table`, when the client asked for tables.
    fn table_of(&self, obj: &Value) -> Option<Value> {
        let (rt, version, include) = self.table.as_ref()?;
        let mut o = obj.clone();
        o["apiVersion"] = json!(self.api_version);
        Some(crate::table::table(
            rt,
            version,
            &[&o],
            include,
            json!({ "resourceVersion": crate::store::rv_of(obj).to_string() }),
        ))
    }

    /// Whether `ev` removes the CRD that defines the watched resource: the real API server
    /// tears that storage down and ends its watches, so clients list again and learn that the
    /// kind is gone.
    fn ends_with(&self, ev: &Event) -> bool {
        if *ev.res != *crate::registry::CRD_KEY || ev.etype != EventType::Deleted {
            return false;
        }
        let spec = &ev.object["spec"];
        match (
            spec["group"].as_str(),
            spec.pointer("/names/plural").and_then(Value::as_str),
        ) {
            (Some(group), Some(plural)) => self.key == format!("{group}/{plural}"),
            _ => false,
        }
    }

    fn classify(&self, ev: &Event) -> Option<EventType> {
        if *ev.res != *self.key || self.ns.as_ref().is_some_and(|n| *n != ev.ns) {
            return None;
        }
        if self.selector.is_empty() {
            return Some(ev.etype);
        }
        let now = self.selector.matches(&ev.object);
        let before = ev.prev.as_ref().is_some_and(|p| self.selector.matches(p));
        match ev.etype {
            EventType::Added => now.then_some(EventType::Added),
            EventType::Deleted => (now || before).then_some(EventType::Deleted),
            EventType::Modified => match (before, now) {
                (true, true) => Some(EventType::Modified),
                (false, true) => Some(EventType::Added),
                (true, false) => Some(EventType::Deleted),
                (false, false) => None,
            },
        }
    }

    fn needs_rewrite(&self, obj: &Value) -> bool {
        !self.meta_only
            && (self.view.is_some()
                || obj.get("apiVersion").and_then(Value::as_str) != Some(self.api_version.as_str()))
    }

    /// The object as this watcher sees it (its version, or its view).
    fn rewrite(&self, obj: &Value) -> Value {
        match self.view {
            Some(v) => v.from_storage(obj, &self.api_version),
            None => {
                let mut o = obj.clone();
                o["apiVersion"] = json!(self.api_version);
                o
            }
        }
    }

    fn line_for_event(&self, buf: &mut Vec<u8>, ty: EventType, ev: &Event) {
        buf.extend_from_slice(b"{\"type\":\"");
        buf.extend_from_slice(ty.as_str().as_bytes());
        buf.extend_from_slice(b"\",\"object\":");
        if let Some(t) = self.table_of(&ev.object) {
            buf.extend_from_slice(&serde_json::to_vec(&t).unwrap_or_default());
        } else if self.meta_only {
            buf.extend_from_slice(ev.meta_json().as_bytes());
        } else if self.needs_rewrite(&ev.object) {
            let o = self.rewrite(&ev.object);
            buf.extend_from_slice(&serde_json::to_vec(&o).unwrap_or_default());
        } else {
            buf.extend_from_slice(ev.object_json().as_bytes());
        }
        buf.extend_from_slice(b"}\n");
    }

    fn line_for_object(&self, buf: &mut Vec<u8>, ty: EventType, obj: &Obj) {
        let v = if let Some(t) = self.table_of(obj) {
            t
        } else if self.meta_only {
            partial_metadata(obj)
        } else if self.needs_rewrite(obj) {
            self.rewrite(obj)
        } else {
            return push_event(buf, ty.as_str(), obj);
        };
        push_event(buf, ty.as_str(), &v);
    }

    fn bookmark(&self, buf: &mut Vec<u8>, rv: u64, initial_end: bool) {
        let (kind, av) = if self.meta_only {
            ("PartialObjectMetadata", "meta.k8s.io/v1")
        } else {
            (self.kind.as_str(), self.api_version.as_str())
        };
        let mut md = json!({ "resourceVersion": rv.to_string() });
        if initial_end {
            md["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
        }
        push_event(
            buf,
            "BOOKMARK",
            &json!({ "kind": kind, "apiVersion": av, "metadata": md }),
        );
    }
}

fn push_event(buf: &mut Vec<u8>, ty: &str, obj: &Value) {
    let _ = serde_json::to_writer(&mut *buf, &json!({ "type": ty, "object": obj }));
    buf.push(b'\n');
}

fn expired_line(msg: String) -> Vec<u8> {
    let mut b = Vec::new();
    push_event(&mut b, "ERROR", &ApiError::expired(msg).to_status());
    b
}

/// Start a watch and return the streaming response.
pub fn start(api: &ApiServer, rt: &Arc<ResourceType>, version: &str, p: WatchParams) -> Response {
    let filter = Filter {
        key: rt.key(),
        ns: p.ns.clone(),
        selector: p.selector.clone(),
        meta_only: p.meta_only,
        api_version: match &p.view {
            Some((_, av)) => av.clone(),
            None => rt.api_version(version),
        },
        kind: rt.kind.clone(),
        view: p.view.as_ref().map(|(v, _)| *v),
        table: p
            .table
            .clone()
            .map(|include| (rt.clone(), version.to_string(), include)),
    };
    let rv_param = p.resource_version.as_deref().unwrap_or("");
    let from_rv: Option<u64> = if rv_param.is_empty() || rv_param == "0" {
        None
    } else {
        match rv_param.parse() {
            Ok(v) => Some(v),
            Err(_) => {
                return ApiError::bad_request(format!(
                    "resourceVersion: Invalid value: {rv_param:?}: must be a decimal number"
                ))
                .into_response();
            }
        }
    };
    let mut first = Vec::new();
    let (rx, start_rv) = {
        let g = api.shared.store.lock();
        let rx = g.subscribe();
        if p.send_initial_events || from_rv.is_none() {
            for o in g.objects_of(&filter.key, filter.ns.as_deref()) {
                if filter.selector.matches(&o) {
                    filter.line_for_object(&mut first, EventType::Added, &o);
                }
            }
            if p.send_initial_events {
                filter.bookmark(&mut first, g.rv, true);
            }
            (rx, g.rv)
        } else {
            let since = from_rv.unwrap_or(0);
            match g.history_since(since) {
                Ok(evs) => {
                    for ev in &evs {
                        if let Some(t) = filter.classify(ev) {
                            filter.line_for_event(&mut first, t, ev);
                        }
                    }
                    (rx, g.rv.max(since))
                }
                Err(oldest) => {
                    let body =
                        expired_line(format!("too old resource version: {since} ({oldest})"));
                    return bytes_response(200, "application/json", body);
                }
            }
        }
    };
    let (tx, out) = mpsc::channel::<Bytes>(64);
    let api2 = api.clone();
    tokio::spawn(async move { pump(api2, filter, p, rx, tx, first, start_rv).await });
    let stream = futures::stream::unfold(out, |mut out| async move {
        out.recv()
            .await
            .map(|b| (Ok::<Bytes, std::convert::Infallible>(b), out))
    });
    let mut r = Response::new(axum::body::Body::from_stream(stream));
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    r.headers_mut().insert(
        http::header::CACHE_CONTROL,
        http::HeaderValue::from_static("no-cache, private"),
    );
    r
}

async fn pump(
    api: ApiServer,
    filter: Filter,
    p: WatchParams,
    mut rx: broadcast::Receiver<Arc<Event>>,
    tx: mpsc::Sender<Bytes>,
    first: Vec<u8>,
    mut progress: u64,
) {
    if !first.is_empty() && tx.send(Bytes::from(first)).await.is_err() {
        return;
    }
    let timeout = p.timeout.unwrap_or(Duration::from_secs(30 * 60));
    let deadline = tokio::time::sleep_until(Instant::now() + timeout);
    tokio::pin!(deadline);
    let interval = api.shared.opts.bookmark_interval;
    let mut ticker = tokio::time::interval_at(Instant::now() + interval, interval);
    let mut stop = api.stop.clone();
    loop {
        let mut buf = Vec::new();
        let mut end = false;
        tokio::select! {
            _ = &mut deadline => break,
            _ = tx.closed() => break,
            _ = async { match stop.as_mut() { Some(s) => { let _ = s.wait_for(|v| *v).await; } None => std::future::pending::<()>().await } } => break,
            _ = ticker.tick(), if p.bookmarks => filter.bookmark(&mut buf, progress, false),
            r = rx.recv() => {
                let mut next = Some(r);
                let mut n = 0;
                while let Some(r) = next.take() {
                    match r {
                        Ok(ev) => {
                            if filter.ends_with(&ev) {
                                end = true;
                                break;
                            }
                            if ev.rv > progress {
                                progress = ev.rv;
                                if let Some(t) = filter.classify(&ev) {
                                    filter.line_for_event(&mut buf, t, &ev);
                                    let drop_p = api.shared.faults.read().map(|f| f.watch_drop_probability).unwrap_or(0.0);
                                    if api.shared.dice.roll(drop_p) {
                                        tracing::debug!("fault injection: dropping a watch stream");
                                        end = true;
                                        break;
                                    }
                                }
                            }
                        }
                        Err(broadcast::error::RecvError::Lagged(_)) => {
                            // Fell behind the broadcast buffer: catch up from the
                            // history ring if it still covers us, else 410.
                            let g = api.shared.store.lock();
                            match g.history_since(progress) {
                                Ok(evs) => {
                                    rx = g.subscribe();
                                    drop(g);
                                    for ev in &evs {
                                        if ev.rv > progress {
                                            progress = ev.rv;
                                            if let Some(t) = filter.classify(ev) {
                                                filter.line_for_event(&mut buf, t, ev);
                                            }
                                        }
                                    }
                                }
                                Err(oldest) => {
                                    drop(g);
                                    buf.extend_from_slice(&expired_line(format!("too old resource version: {progress} ({oldest})")));
                                    end = true;
                                }
                            }
                            break;
                        }
                        Err(broadcast::error::RecvError::Closed) => {
                            end = true;
                            break;
                        }
                    }
                    n += 1;
                    if n < 512 {
                        match rx.try_recv() {
                            Ok(ev) => next = Some(Ok(ev)),
                            Err(broadcast::error::TryRecvError::Lagged(k)) => next = Some(Err(broadcast::error::RecvError::Lagged(k))),
                            Err(_) => {}
                        }
                    }
                }
            }
        }
        if !buf.is_empty() && tx.send(Bytes::from(buf)).await.is_err() {
            break;
        }
        if end {
            break;
        }
    }
}
