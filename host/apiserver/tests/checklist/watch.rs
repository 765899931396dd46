//! Checklist 1: watch correctness.

use crate::*;
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, ListParams, PostParams, WatchEvent, WatchParams};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use std::time::{Duration, Instant};

#[tokio::test]
async fn list_then_watch_from_its_resource_version_sees_every_later_change_in_order() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    cms.create(&PostParams::default(), &cm("a", &[]))
        .await
        .unwrap();
    let list = cms.list(&ListParams::default()).await.unwrap();
    let list_rv = list.metadata.resource_version.clone().unwrap();
    assert!(!list_rv.is_empty(), "a list carries a resourceVersion");

    cms.create(&PostParams::default(), &cm("b", &[]))
        .await
        .unwrap();
    let mut a = cms.get("a").await.unwrap();
    a.data
        .as_mut()
        .unwrap()
        .insert("k".into(), "changed".into());
    cms.replace("a", &PostParams::default(), &a).await.unwrap();
    cms.delete("b", &Default::default()).await.unwrap();

    let events: Vec<_> = cms
        .watch(&WatchParams::default().timeout(1), &list_rv)
        .await
        .unwrap()
        .take(3)
        .try_collect()
        .await
        .unwrap();
    let summary: Vec<(String, String, u64)> = events
        .iter()
        .map(|e| match e {
            WatchEvent::Added(o) => ("ADDED".into(), o.metadata.name.clone().unwrap(), rv(o)),
            WatchEvent::Modified(o) => ("MODIFIED".into(), o.metadata.name.clone().unwrap(), rv(o)),
            WatchEvent::Deleted(o) => ("DELETED".into(), o.metadata.name.clone().unwrap(), rv(o)),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        summary
            .iter()
            .map(|(t, n, _)| (t.as_str(), n.as_str()))
            .collect::<Vec<_>>(),
        vec![("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
    );
    assert!(
        summary.windows(2).all(|w| w[0].2 < w[1].2),
        "rvs strictly increase: {summary:?}"
    );
}

#[tokio::test]
async fn watch_is_newline_delimited_json_with_bookmarks_and_ends_at_timeout_seconds() {
    let s = server_with(|o| o.bookmark_interval = Duration::from_millis(100));
    let start = Instant::now();
    let (code, lines, ended) = watch_lines(&s, "/api/v1/namespaces/default/configmaps?&watch=true&allowWatchBookmarks=true&timeoutSeconds=1&resourceVersion=1", None, 100, Duration::from_secs(5)).await;
    assert_eq!(code, 200);
    assert!(ended, "the server closes the stream at timeoutSeconds");
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "closed after about 1s, took {:?}",
        start.elapsed()
    );
    let bookmark = lines
        .iter()
        .find(|l| l["type"] == "BOOKMARK")
        .expect("a BOOKMARK event");
    assert_eq!(bookmark["object"]["kind"], "ConfigMap");
    assert!(
        bookmark["object"]["metadata"]["resourceVersion"]
            .as_str()
            .is_some_and(|r| !r.is_empty())
    );

    // Without allowWatchBookmarks there are none.
    let (_, lines, _) = watch_lines(
        &s,
        "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1&resourceVersion=1",
        None,
        100,
        Duration::from_secs(5),
    )
    .await;
    assert!(lines.is_empty(), "{lines:?}");
}

#[tokio::test]
async fn watch_from_a_too_old_resource_version_is_http_200_with_an_error_410_event() {
    let s = server_with(|o| o.watch_history = 5);
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    for i in 0..10 {
        cms.create(&PostParams::default(), &cm(&format!("c{i}"), &[]))
            .await
            .unwrap();
    }
    let (code, lines, ended) = watch_lines(
        &s,
        "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=2",
        None,
        10,
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(code, 200, "never an HTTP 410");
    assert!(ended);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["type"], "ERROR");
    let st = &lines[0]["object"];
    assert_eq!(
        (
            st["kind"].as_str(),
            st["code"].as_i64(),
            st["reason"].as_str()
        ),
        (Some("Status"), Some(410), Some("Expired"))
    );
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .starts_with("too old resource version: 2 ("),
        "{st}"
    );

    // kube sees it as a 410 error event.
    let ev = cms
        .watch(&WatchParams::default().timeout(1), "2")
        .await
        .unwrap()
        .boxed()
        .next()
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(ev, WatchEvent::Error(ref e) if e.code == 410),
        "{ev:?}"
    );
}

#[tokio::test]
async fn watch_from_zero_sends_current_state_and_streaming_lists_end_with_an_initial_events_bookmark()
 {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    cms.create(&PostParams::default(), &cm("x", &[]))
        .await
        .unwrap();
    let (_, lines, _) = watch_lines(
        &s,
        "/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=0&timeoutSeconds=1",
        None,
        1,
        Duration::from_secs(3),
    )
    .await;
    assert_eq!(
        (
            lines[0]["type"].as_str(),
            lines[0]["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some("x"))
    );

    let uri = "/api/v1/namespaces/default/configmaps?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1";
    let (_, lines, _) = watch_lines(&s, uri, None, 2, Duration::from_secs(3)).await;
    assert_eq!(lines[0]["type"], "ADDED");
    assert_eq!(lines[1]["type"], "BOOKMARK");
    assert_eq!(
        lines[1]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
}

#[tokio::test]
async fn label_selectors_in_notin_exists_and_not_work_on_list() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    for (n, l) in [
        ("a", Some("a")),
        ("b", Some("b")),
        ("c", Some("c")),
        ("none", None),
    ] {
        let labels: Vec<(&str, &str)> = l.map(|v| vec![("app", v)]).unwrap_or_default();
        cms.create(&PostParams::default(), &cm(n, &labels))
            .await
            .unwrap();
    }
    let names = |sel: &'static str| {
        let cms = cms.clone();
        async move {
            let l = cms.list(&ListParams::default().labels(sel)).await.unwrap();
            l.items
                .iter()
                .map(|c| c.metadata.name.clone().unwrap())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(names("app in (a,b)").await, ["a", "b"]);
    assert_eq!(
        names("app in (a, b)").await,
        ["a", "b"],
        "kube encodes the space as '+'"
    );
    assert_eq!(names("app notin (a,b)").await, ["c", "none"]);
    assert_eq!(names("app").await, ["a", "b", "c"]);
    assert_eq!(names("!app").await, ["none"]);
    assert_eq!(names("app!=a").await, ["b", "c", "none"]);
    assert_eq!(names("app=a").await, ["a"]);
    let fs = cms
        .list(&ListParams::default().fields("metadata.name=b"))
        .await
        .unwrap();
    assert_eq!(fs.items.len(), 1);
    let fs = cms
        .list(&ListParams::default().fields("metadata.name!=b,metadata.namespace=default"))
        .await
        .unwrap();
    assert_eq!(fs.items.len(), 3);
}

#[tokio::test]
async fn selectors_on_watch_turn_objects_leaving_or_entering_the_selection_into_deleted_and_added()
{
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    let start = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    cms.create(&PostParams::default(), &cm("in", &[("app", "a")]))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &cm("out", &[("app", "z")]))
        .await
        .unwrap();
    let lp = |l: serde_json::Value| kube::api::Patch::Merge(json!({"metadata": {"labels": l}}));
    cms.patch("in", &Default::default(), &lp(json!({"app": "z"})))
        .await
        .unwrap();
    cms.patch("out", &Default::default(), &lp(json!({"app": "b"})))
        .await
        .unwrap();
    let wp = WatchParams::default().labels("app in (a,b)").timeout(1);
    let evs: Vec<_> = cms
        .watch(&wp, &start)
        .await
        .unwrap()
        .take(3)
        .try_collect()
        .await
        .unwrap();
    let got: Vec<(&str, String)> = evs
        .iter()
        .map(|e| match e {
            WatchEvent::Added(o) => ("ADDED", o.metadata.name.clone().unwrap()),
            WatchEvent::Deleted(o) => ("DELETED", o.metadata.name.clone().unwrap()),
            WatchEvent::Modified(o) => ("MODIFIED", o.metadata.name.clone().unwrap()),
            o => panic!("{o:?}"),
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("ADDED", "in".into()),
            ("DELETED", "in".into()),
            ("ADDED", "out".into())
        ]
    );

    // metadata.name field selector on watch (what kubectl delete --wait uses).
    let (_, lines, _) = watch_lines(&s, &format!("/api/v1/namespaces/default/configmaps?fieldSelector=metadata.name%3Dout&resourceVersion={start}&watch=true&timeoutSeconds=1"), None, 10, Duration::from_secs(3)).await;
    assert!(
        !lines.is_empty()
            && lines
                .iter()
                .all(|l| l["object"]["metadata"]["name"] == "out"),
        "{lines:?}"
    );
}

#[tokio::test]
async fn leading_empty_query_pair_is_accepted() {
    let s = server();
    let (code, body) = raw(
        &s,
        "GET",
        "/api/v1/namespaces/default/configmaps?&limit=500",
        None,
        "",
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["kind"], "ConfigMapList");
}

#[tokio::test]
async fn list_pagination_with_limit_and_continue() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    for i in 0..5 {
        cms.create(&PostParams::default(), &cm(&format!("p{i}"), &[]))
            .await
            .unwrap();
    }
    let first = cms.list(&ListParams::default().limit(2)).await.unwrap();
    assert_eq!(first.items.len(), 2);
    let token = first.metadata.continue_.clone().expect("a continue token");
    let rest = cms
        .list(&ListParams::default().limit(10).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(
        rest.items
            .iter()
            .map(|c| c.metadata.name.clone().unwrap())
            .collect::<Vec<_>>(),
        ["p2", "p3", "p4"]
    );
    assert!(rest.metadata.continue_.is_none_or(|c| c.is_empty()));
}

async fn next_event<K: Clone + std::fmt::Debug>(
    s: &mut (impl futures::Stream<Item = Result<Event<K>, watcher::Error>> + Unpin),
) -> Event<K> {
    tokio::time::timeout(Duration::from_secs(10), s.next())
        .await
        .expect("watcher event in time")
        .expect("stream open")
        .expect("no error")
}

fn kind_of<K>(e: &Event<K>) -> &'static str {
    match e {
        Event::Init => "Init",
        Event::InitApply(_) => "InitApply",
        Event::InitDone => "InitDone",
        Event::Apply(_) => "Apply",
        Event::Delete(_) => "Delete",
    }
}

#[tokio::test]
async fn kube_runtime_watcher_list_watch_sees_init_apply_and_delete() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    cms.create(&PostParams::default(), &cm("pre", &[]))
        .await
        .unwrap();
    let mut w = watcher::watcher(cms.clone(), watcher::Config::default())
        .default_backoff()
        .boxed();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(kind_of(&next_event(&mut w).await));
    }
    assert_eq!(seen, ["Init", "InitApply", "InitDone"]);
    cms.create(&PostParams::default(), &cm("live", &[]))
        .await
        .unwrap();
    assert!(
        matches!(next_event(&mut w).await, Event::Apply(c) if c.metadata.name.as_deref() == Some("live"))
    );
    cms.delete("live", &Default::default()).await.unwrap();
    assert!(
        matches!(next_event(&mut w).await, Event::Delete(c) if c.metadata.name.as_deref() == Some("live"))
    );
}

#[tokio::test]
async fn kube_runtime_watcher_with_streaming_lists() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    cms.create(&PostParams::default(), &cm("pre", &[]))
        .await
        .unwrap();
    let mut w = watcher::watcher(cms.clone(), watcher::Config::default().streaming_lists())
        .default_backoff()
        .boxed();
    let seen: Vec<_> = [
        next_event(&mut w).await,
        next_event(&mut w).await,
        next_event(&mut w).await,
    ]
    .iter()
    .map(kind_of)
    .collect();
    assert_eq!(seen, ["Init", "InitApply", "InitDone"]);
    cms.create(&PostParams::default(), &cm("live", &[]))
        .await
        .unwrap();
    assert_eq!(kind_of(&next_event(&mut w).await), "Apply");
}

#[tokio::test]
async fn kube_runtime_metadata_watchers_see_the_same_events() {
    let s = server();
    let cms: Api<ConfigMap> = Api::default_namespaced(s.client());
    cms.create(&PostParams::default(), &cm("pre", &[]))
        .await
        .unwrap();
    // kube 5 preferred spelling: a watcher over PartialObjectMeta<K>.
    let meta_api: Api<PartialObjectMeta<ConfigMap>> = Api::default_namespaced(s.client());
    let mut w = watcher::watcher(meta_api, watcher::Config::default())
        .default_backoff()
        .boxed();
    #[allow(deprecated)]
    let mut legacy = kube::runtime::metadata_watcher(cms.clone(), watcher::Config::default())
        .default_backoff()
        .boxed();
    let seen: Vec<_> = [
        next_event(&mut w).await,
        next_event(&mut w).await,
        next_event(&mut w).await,
    ]
    .iter()
    .map(kind_of)
    .collect();
    assert_eq!(seen, ["Init", "InitApply", "InitDone"]);
    let seen: Vec<_> = [
        next_event(&mut legacy).await,
        next_event(&mut legacy).await,
        next_event(&mut legacy).await,
    ]
    .iter()
    .map(kind_of)
    .collect();
    assert_eq!(seen, ["Init", "InitApply", "InitDone"]);
    cms.create(&PostParams::default(), &cm("live", &[]))
        .await
        .unwrap();
    assert!(
        matches!(next_event(&mut w).await, Event::Apply(m) if m.metadata.name.as_deref() == Some("live"))
    );
    assert!(
        matches!(next_event(&mut legacy).await, Event::Apply(m) if m.metadata.name.as_deref() == Some("live"))
    );
    cms.delete("live", &Default::default()).await.unwrap();
    assert!(
        matches!(next_event(&mut w).await, Event::Delete(m) if m.metadata.name.as_deref() == Some("live"))
    );
    assert!(
        matches!(next_event(&mut legacy).await, Event::Delete(m) if m.metadata.name.as_deref() == Some("live"))
    );
}

#[tokio::test]
async fn kube_runtime_watcher_relists_after_410() {
    // History of 5 events; the watcher's watch times out after 1 s, by which
    // time its last seen rv has fallen out of the ring: it gets the ERROR 410
    // event, re-lists (Init again) and then sees live events.
    let s = server_with(|o| o.watch_history = 5);
    let cms: Api<ConfigMap> = Api::namespaced(s.client(), "default");
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::default_namespaced(s.client());
    let mut w = watcher::watcher(cms.clone(), watcher::Config::default().timeout(1))
        .default_backoff()
        .boxed();
    let seen: Vec<_> = [next_event(&mut w).await, next_event(&mut w).await]
        .iter()
        .map(kind_of)
        .collect();
    assert_eq!(seen, ["Init", "InitDone"]);
    for i in 0..10 {
        let sec: k8s_openapi::api::core::v1::Secret =
            serde_json::from_value(json!({"metadata": {"name": format!("s{i}")}})).unwrap();
        secrets.create(&PostParams::default(), &sec).await.unwrap();
    }
    let err = tokio::time::timeout(Duration::from_secs(10), w.next())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(&err, Err(watcher::Error::WatchError(s)) if s.code == 410 && s.reason == "Expired"),
        "{err:?}"
    );
    assert_eq!(
        kind_of(&next_event(&mut w).await),
        "Init",
        "re-listed after the 410"
    );
    assert_eq!(kind_of(&next_event(&mut w).await), "InitDone");
    cms.create(&PostParams::default(), &cm("after", &[]))
        .await
        .unwrap();
    assert!(
        matches!(next_event(&mut w).await, Event::Apply(c) if c.metadata.name.as_deref() == Some("after"))
    );
}
