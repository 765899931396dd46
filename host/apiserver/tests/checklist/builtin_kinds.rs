//! Part 2, item 2: built-in kinds — names, generateName, Secret stringData,
//! ConfigMap decoding, the defaults users see on workloads and Services, and
//! 422 `Invalid` with `details.causes`.

use super::*;

async fn post(s: &ApiServer, path: &str, body: Value) -> (u16, Value) {
    raw(s, "POST", path, Some("application/json"), &body.to_string()).await
}

/// POSTs `body` and expects 422 Invalid; returns the Status.
async fn rejected(s: &ApiServer, path: &str, body: Value) -> Value {
    let (code, st) = post(s, path, body.clone()).await;
    assert_eq!(code, 422, "{path} {body}: {st}");
    st
}

#[tokio::test]
async fn names_are_rfc1123_subdomains_or_labels_per_kind() {
    let s = server();
    let st = rejected(
        &s,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "Bad_Name"}}),
    )
    .await;
    assert_eq!(
        st["message"],
        "ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    );
    assert_eq!(st["details"]["causes"][0]["field"], "metadata.name");
    assert_eq!(st["details"]["causes"][0]["reason"], "FieldValueInvalid");
    // dots are fine for a subdomain, not for a namespace (label)
    let (code, _) = post(
        &s,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "a.b"}}),
    )
    .await;
    assert_eq!(code, 201);
    let st = rejected(
        &s,
        "/api/v1/namespaces",
        json!({"metadata": {"name": "a.b"}}),
    )
    .await;
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("a lowercase RFC 1123 label must consist of"),
        "{st}"
    );
    // Services: DNS-1035 labels (must start with a letter)
    let st = rejected(
        &s,
        "/api/v1/namespaces/default/services",
        json!({"metadata": {"name": "1svc"}, "spec": {"ports": [{"port": 80}]}}),
    )
    .await;
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("a DNS-1035 label must consist of"),
        "{st}"
    );
    let long = "a".repeat(254);
    let st = rejected(
        &s,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": long}}),
    )
    .await;
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .ends_with("must be no more than 253 characters"),
        "{st}"
    );
}

#[tokio::test]
async fn generate_name_appends_five_lowercase_alphanumerics() {
    let s = server();
    let mut names = std::collections::HashSet::new();
    for _ in 0..20 {
        let (code, o) = post(
            &s,
            "/api/v1/namespaces/default/configmaps",
            json!({"metadata": {"generateName": "web-"}}),
        )
        .await;
        assert_eq!(code, 201);
        let n = o["metadata"]["name"].as_str().unwrap().to_string();
        let suffix = n.strip_prefix("web-").unwrap();
        assert_eq!(suffix.len(), 5, "{n}");
        assert!(
            suffix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
            "{n}"
        );
        assert_eq!(o["metadata"]["generateName"], "web-");
        names.insert(n);
    }
    assert_eq!(names.len(), 20);
    let st = rejected(
        &s,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {}}),
    )
    .await;
    assert_eq!(
        st["message"],
        "ConfigMap \"\" is invalid: metadata.name: Required value: name or generateName is required"
    );
}

#[tokio::test]
async fn secret_string_data_is_merged_into_base64_data_and_type_defaults_to_opaque() {
    let s = server();
    let (code, o) = post(&s, "/api/v1/namespaces/default/secrets", json!({
        "metadata": {"name": "s"}, "data": {"a": "YQ=="}, "stringData": {"user": "admin", "a": "b"}})).await;
    assert_eq!(code, 201, "{o}");
    assert_eq!(o["data"], json!({"a": "Yg==", "user": "YWRtaW4="}));
    assert!(o.get("stringData").is_none());
    assert_eq!(o["type"], "Opaque");
    // an explicit type is kept; stringData also works on update
    let (code, o) = raw(
        &s,
        "PUT",
        "/api/v1/namespaces/default/secrets/s",
        Some("application/json"),
        &json!({"metadata": {"name": "s"}, "type": "Opaque", "stringData": {"k": "v"}}).to_string(),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(o["data"], json!({"k": "dg=="}));
    // data must be base64
    let (code, st) = post(
        &s,
        "/api/v1/namespaces/default/secrets",
        json!({"metadata": {"name": "bad"}, "data": {"a": "not base64!"}}),
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(st["reason"], "BadRequest");
    assert_eq!(
        st["message"],
        "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 3"
    );
}

#[tokio::test]
async fn config_map_data_must_be_strings() {
    let s = server();
    let (code, st) = post(
        &s,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "c"}, "data": {"a": 1}}),
    )
    .await;
    assert_eq!(code, 400);
    assert_eq!(st["reason"], "BadRequest");
    assert_eq!(
        st["message"],
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string"
    );
    let (code, _) = post(
        &s,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "c"}, "data": {"a": "1"}}),
    )
    .await;
    assert_eq!(code, 201);
    let (code, st) = raw(
        &s,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/c",
        Some("application/merge-patch+json"),
        &json!({"data": {"b": true}}).to_string(),
    )
    .await;
    assert_eq!(code, 400);
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("cannot unmarshal bool into Go struct field ConfigMap.data of type string")
    );
    let st = rejected(
        &s,
        "/api/v1/namespaces/default/configmaps",
        json!({"metadata": {"name": "k"}, "data": {"a b": "1"}}),
    )
    .await;
    assert_eq!(st["details"]["causes"][0]["field"], "data[a b]");
}

fn deployment(name: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": "web", "image": "nginx:1.25", "ports": [{"containerPort": 80}]},
                                                      {"name": "side", "image": "busybox"}]}}}})
}

#[tokio::test]
async fn workload_defaults() {
    let s = server();
    let (code, d) = post(
        &s,
        "/apis/apps/v1/namespaces/default/deployments",
        deployment("web"),
    )
    .await;
    assert_eq!(code, 201, "{d}");
    let spec = &d["spec"];
    assert_eq!(spec["replicas"], 1);
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(spec["progressDeadlineSeconds"], 600);
    assert_eq!(
        spec["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}})
    );
    let ps = &spec["template"]["spec"];
    assert_eq!(ps["restartPolicy"], "Always");
    assert_eq!(ps["dnsPolicy"], "ClusterFirst");
    assert_eq!(ps["terminationGracePeriodSeconds"], 30);
    assert_eq!(ps["schedulerName"], "default-scheduler");
    assert_eq!(ps["securityContext"], json!({}));
    assert_eq!(ps["containers"][0]["imagePullPolicy"], "IfNotPresent");
    assert_eq!(
        ps["containers"][1]["imagePullPolicy"], "Always",
        "untagged image"
    );
    assert_eq!(
        ps["containers"][0]["terminationMessagePath"],
        "/dev/termination-log"
    );
    assert_eq!(ps["containers"][0]["terminationMessagePolicy"], "File");
    assert_eq!(ps["containers"][0]["ports"][0]["protocol"], "TCP");
    assert!(d.get("status").is_none(), "no status without the simulator");

    let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
        "spec": {"serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                 "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "db", "image": "postgres:16"}]}}}});
    let (code, o) = post(&s, "/apis/apps/v1/namespaces/default/statefulsets", sts).await;
    assert_eq!(code, 201, "{o}");
    assert_eq!(o["spec"]["replicas"], 1);
    assert_eq!(o["spec"]["podManagementPolicy"], "OrderedReady");
    assert_eq!(
        o["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    );

    let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
        "spec": {"selector": {"matchLabels": {"app": "agent"}},
                 "template": {"metadata": {"labels": {"app": "agent"}}, "spec": {"containers": [{"name": "a", "image": "agent:latest"}]}}}});
    let (code, o) = post(&s, "/apis/apps/v1/namespaces/default/daemonsets", ds).await;
    assert_eq!(code, 201, "{o}");
    assert_eq!(
        o["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}})
    );
    assert_eq!(
        o["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"],
        "Always"
    );

    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "once"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "j", "image": "busybox:1"}]}}}});
    let (code, o) = post(&s, "/apis/batch/v1/namespaces/default/jobs", job).await;
    assert_eq!(code, 201, "{o}");
    assert_eq!(o["spec"]["parallelism"], 1);
    assert_eq!(o["spec"]["completions"], 1);
    assert_eq!(o["spec"]["backoffLimit"], 6);
    assert_eq!(o["spec"]["completionMode"], "NonIndexed");
    let uid = o["metadata"]["uid"].as_str().unwrap();
    assert_eq!(
        o["spec"]["selector"]["matchLabels"]["batch.kubernetes.io/controller-uid"],
        uid
    );
    assert_eq!(
        o["spec"]["template"]["metadata"]["labels"]["job-name"],
        "once"
    );

    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    let (code, o) = post(&s, "/api/v1/namespaces/default/pods", pod).await;
    assert_eq!(code, 201, "{o}");
    assert_eq!(o["spec"]["restartPolicy"], "Always");
    assert_eq!(o["spec"]["enableServiceLinks"], true);
    assert_eq!(o["spec"]["containers"][0]["imagePullPolicy"], "Always");
    assert_eq!(
        o["status"],
        json!({"phase": "Pending", "qosClass": "BestEffort"})
    );
}

#[tokio::test]
async fn service_defaults_allocate_a_cluster_ip() {
    let s = server();
    let (code, o) = post(&s, "/api/v1/namespaces/default/services", json!({
        "metadata": {"name": "web"}, "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}})).await;
    assert_eq!(code, 201, "{o}");
    let spec = &o["spec"];
    assert_eq!(spec["type"], "ClusterIP");
    assert_eq!(spec["sessionAffinity"], "None");
    assert_eq!(
        spec["ports"][0],
        json!({"port": 80, "protocol": "TCP", "targetPort": 80})
    );
    let ip = spec["clusterIP"].as_str().unwrap().to_string();
    let parsed: std::net::Ipv4Addr = ip.parse().unwrap();
    assert_eq!(parsed.octets()[0], 10);
    assert!(
        (96..112).contains(&parsed.octets()[1]),
        "{ip} in 10.96.0.0/12"
    );
    assert_eq!(spec["clusterIPs"], json!([ip]));
    assert_eq!(spec["ipFamilies"], json!(["IPv4"]));
    // a PUT without clusterIP keeps it; changing it is rejected
    let (code, o2) = raw(
        &s,
        "PUT",
        "/api/v1/namespaces/default/services/web",
        Some("application/json"),
        &json!({"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}}).to_string(),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(o2["spec"]["clusterIP"], ip);
    let (code, st) = raw(
        &s,
        "PATCH",
        "/api/v1/namespaces/default/services/web",
        Some("application/merge-patch+json"),
        &json!({"spec": {"clusterIP": "10.96.0.99"}}).to_string(),
    )
    .await;
    assert_eq!(code, 422);
    assert_eq!(
        st["details"]["causes"][0]["message"],
        "Invalid value: \"10.96.0.99\": field is immutable"
    );
    // NodePort gets a node port in range
    let (code, o) = post(&s, "/api/v1/namespaces/default/services", json!({
        "metadata": {"name": "np"}, "spec": {"type": "NodePort", "ports": [{"port": 80, "targetPort": 8080}]}})).await;
    assert_eq!(code, 201);
    let np = o["spec"]["ports"][0]["nodePort"].as_u64().unwrap();
    assert!((30000..=32767).contains(&np));
    assert_eq!(o["spec"]["ports"][0]["targetPort"], 8080);
}

#[tokio::test]
async fn invalid_built_ins_get_422_with_causes() {
    let s = server();
    // container without image, selector not matching the template
    let mut d = deployment("web");
    d["spec"]["template"]["spec"]["containers"][0]
        .as_object_mut()
        .unwrap()
        .remove("image");
    d["spec"]["selector"]["matchLabels"]["app"] = json!("other");
    let (code, st) = post(&s, "/apis/apps/v1/namespaces/default/deployments", d).await;
    assert_eq!(code, 422, "{st}");
    assert_eq!(st["reason"], "Invalid");
    assert_eq!(st["details"]["kind"], "Deployment");
    assert_eq!(st["details"]["group"], "apps");
    assert_eq!(
        st["message"],
        "Deployment.apps \"web\" is invalid: [spec.template.metadata.labels: Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`, spec.template.spec.containers[0].image: Required value]"
    );
    assert_eq!(
        st["details"]["causes"],
        json!([
            {"reason": "FieldValueInvalid", "message": "Invalid value: map[string]string{\"app\":\"web\"}: `selector` does not match template `labels`", "field": "spec.template.metadata.labels"},
            {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.template.spec.containers[0].image"}
        ])
    );
    let mut d = deployment("web");
    d["spec"].as_object_mut().unwrap().remove("selector");
    let st = rejected(&s, "/apis/apps/v1/namespaces/default/deployments", d).await;
    assert_eq!(
        st["message"],
        "Deployment.apps \"web\" is invalid: spec.selector: Required value"
    );
    let mut d = deployment("web");
    d["spec"]["replicas"] = json!(-1);
    let st = rejected(&s, "/apis/apps/v1/namespaces/default/deployments", d).await;
    assert_eq!(
        st["message"],
        "Deployment.apps \"web\" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0"
    );
    // a Job's pod template needs OnFailure or Never
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"template": {"spec": {"containers": [{"name": "j", "image": "busybox:1"}]}}}});
    let st = rejected(&s, "/apis/batch/v1/namespaces/default/jobs", job).await;
    assert_eq!(
        st["message"],
        "Job.batch \"j\" is invalid: spec.template.spec.restartPolicy: Unsupported value: \"Always\": supported values: \"OnFailure\", \"Never\""
    );
    assert_eq!(
        st["details"]["causes"][0]["reason"],
        "FieldValueNotSupported"
    );
    // Services
    let st = rejected(
        &s,
        "/api/v1/namespaces/default/services",
        json!({
        "metadata": {"name": "svc"}, "spec": {"type": "Magic", "ports": [{"port": 70000}]}}),
    )
    .await;
    assert_eq!(
        st["message"],
        "Service \"svc\" is invalid: [spec.type: Unsupported value: \"Magic\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\", spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive]"
    );
    let st = rejected(
        &s,
        "/api/v1/namespaces/default/services",
        json!({"metadata": {"name": "svc"}, "spec": {}}),
    )
    .await;
    assert_eq!(
        st["message"],
        "Service \"svc\" is invalid: spec.ports: Required value"
    );
    // a Pod without containers
    let st = rejected(
        &s,
        "/api/v1/namespaces/default/pods",
        json!({"metadata": {"name": "p"}, "spec": {}}),
    )
    .await;
    assert_eq!(
        st["message"],
        "Pod \"p\" is invalid: spec.containers: Required value"
    );
    // install_object reports the same errors
    let e = s
        .install_object(
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}),
        )
        .unwrap_err();
    assert!(
        e.to_string().contains("spec.containers: Required value"),
        "{e}"
    );
}
