//! Static checks of the deployment files against the code.
//!
//! Docker and the Terraform providers cannot run on the machines Sluice is
//! developed on, so these tests read the files instead: the Dockerfile, the
//! compose file, Prometheus and Grafana configuration in `infra/`, and the
//! Terraform module in `terraform/`. They check that the files parse, that
//! every setting they pass to `sluice` is a flag the binary has (read from the
//! live clap definition), that the DynamoDB table has the key schema the
//! metadata log creates, and that the task role grants exactly the S3 and
//! DynamoDB actions the code calls — no fewer, no more.

use clap::Args as _;
use hcl::{Block, Body, Expression, ObjectKey};
use serde_norway::Value;
use sluice::config::ServeArgs;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

// ---- the CLI ---------------------------------------------------------------

/// `SLUICE_*` variable → long flag, for every flag of `sluice serve` (and
/// `sluice init`, which takes the same flags).
fn serve_env() -> BTreeMap<String, String> {
    let cmd = ServeArgs::augment_args(clap::Command::new("serve"));
    cmd.get_arguments()
        .filter_map(|a| {
            let env = a.get_env()?.to_str()?.to_string();
            Some((env, a.get_long()?.to_string()))
        })
        .collect()
}

/// Turns `SLUICE_*` settings into command-line flags and runs the startup
/// validation `sluice serve` runs, so a setting the binary would refuse
/// (an unknown variable, a bad URL or address, a bad combination) fails here.
fn validate_settings(what: &str, settings: &BTreeMap<String, String>) {
    let flags = serve_env();
    let cmd = ServeArgs::augment_args(clap::Command::new("serve"));
    let mut args = Vec::new();
    for (k, v) in settings.iter().filter(|(k, _)| k.starts_with("SLUICE_")) {
        let long = flags
            .get(k)
            .unwrap_or_else(|| panic!("{what}: {k} is not a variable of `sluice serve` (flags: {flags:?})"));
        let takes_value = cmd
            .get_arguments()
            .find(|a| a.get_long() == Some(long.as_str()))
            .is_some_and(|a| a.get_action().takes_values());
        if takes_value {
            args.push(format!("--{long}={v}"));
        } else {
            // A switch: its variable says true or false.
            match v.as_str() {
                "true" | "1" => args.push(format!("--{long}")),
                "false" | "0" => {}
                other => panic!("{what}: {k}={other:?} is not true or false"),
            }
        }
    }
    let parsed = ServeArgs::parse_from(&args).unwrap_or_else(|e| panic!("{what}: {args:?} do not parse: {e}"));
    if let Err(e) = parsed.validate() {
        panic!("{what}: sluice would refuse {args:?}: {e}");
    }
}

// ---- Docker ------------------------------------------------------------------

#[test]
fn dockerfile_is_multi_stage_non_root_and_checks_ready() {
    let df = read("Dockerfile");
    let instructions: Vec<&str> = df
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let froms = instructions.iter().filter(|l| l.starts_with("FROM ")).count();
    assert!(
        froms >= 2,
        "a multi-stage build has at least two FROM lines, found {froms}"
    );
    assert!(
        df.contains("COPY --from=build"),
        "the runtime stage copies the binary from the build stage"
    );
    let user = instructions
        .iter()
        .rev()
        .find(|l| l.starts_with("USER "))
        .expect("the image sets a USER");
    let uid = user["USER ".len()..].split(':').next().unwrap();
    assert!(uid != "root" && uid != "0", "the runtime user must not be root: {user}");
    let health = df.find("HEALTHCHECK").expect("a HEALTHCHECK");
    assert!(df[health..].contains("/ready"), "the health check asks /ready");
    assert!(
        df.contains("EXPOSE 8080 9092"),
        "the default HTTP and Kafka ports are exposed"
    );
    assert!(df.contains("ENTRYPOINT [\"/usr/local/bin/sluice\"]"));
    // Every SLUICE_* variable the image sets is a flag.
    for word in df.split(|c: char| c.is_whitespace() || c == '\\') {
        if let Some((k, _)) = word.split_once('=') {
            if k.starts_with("SLUICE_") {
                assert!(serve_env().contains_key(k), "Dockerfile sets unknown {k}");
            }
        }
    }
}

fn compose() -> Value {
    let mut v: Value = serde_norway::from_str(&read("infra/docker-compose.yml")).expect("compose file parses");
    v.apply_merge().expect("merge keys resolve");
    // `<<:` inside nested maps (the environment of each node).
    fn merge_all(v: &mut Value) {
        match v {
            Value::Mapping(m) => {
                for (_, x) in m.iter_mut() {
                    let _ = x.apply_merge();
                    merge_all(x);
                }
            }
            Value::Sequence(s) => s.iter_mut().for_each(merge_all),
            _ => {}
        }
    }
    merge_all(&mut v);
    v
}

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| s.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

fn env_of(service: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    if let Some(m) = service["environment"].as_mapping() {
        for (k, v) in m {
            let v = match v {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                other => panic!("environment value {other:?} is not a scalar"),
            };
            out.insert(k.as_str().expect("string keys").to_string(), v);
        }
    }
    out
}

const NODES: [&str; 3] = ["n1", "n2", "n3"];

#[test]
fn compose_runs_the_stores_their_setup_three_nodes_and_monitoring() {
    let c = compose();
    let services = c["services"].as_mapping().expect("services");
    let names: BTreeSet<&str> = services.keys().filter_map(Value::as_str).collect();
    for s in [
        "minio",
        "dynamodb",
        "buckets",
        "init",
        "n1",
        "n2",
        "n3",
        "prometheus",
        "grafana",
    ] {
        assert!(names.contains(s), "service {s} is missing: {names:?}");
    }
    for n in NODES {
        let s = &c["services"][n];
        assert_eq!(
            s["restart"].as_str(),
            Some("unless-stopped"),
            "{n}: a fenced node must come back"
        );
        assert_eq!(strings(&s["command"]), ["serve"], "{n} runs `sluice serve`");
        assert_eq!(
            s["build"]["dockerfile"].as_str(),
            Some("Dockerfile"),
            "{n} is built from the Dockerfile"
        );
        assert!(
            s["depends_on"]["init"]["condition"].as_str() == Some("service_completed_successfully"),
            "{n} starts after the table and bucket exist"
        );
    }
    // The one-shot set-up: the bucket the nodes use is the one created.
    let mc = strings(&c["services"]["buckets"]["command"]).join(" ");
    let object_store = env_of(&c["services"]["n1"])["SLUICE_OBJECT_STORE"].clone();
    let bucket = object_store
        .strip_prefix("s3://")
        .and_then(|r| r.split('/').next())
        .expect("an s3:// object store");
    assert!(mc.contains(&format!("mb --ignore-existing local/{bucket}")), "{mc}");
    assert_eq!(strings(&c["services"]["init"]["command"]), ["init"]);
    // Health checks: the stores have them; the nodes inherit the image's /ready check.
    for s in ["minio", "dynamodb"] {
        assert!(
            c["services"][s]["healthcheck"]["test"].is_sequence(),
            "{s} has a health check"
        );
    }
}

#[test]
fn compose_settings_are_flags_the_binary_accepts() {
    let c = compose();
    let mut ids = BTreeSet::new();
    let mut kafka = BTreeSet::new();
    for name in ["init", "n1", "n2", "n3"] {
        let env = env_of(&c["services"][name]);
        validate_settings(&format!("compose service {name}"), &env);
        for (k, v) in &env {
            // Endpoints name a service of the same file.
            if k.ends_with("_ENDPOINT") {
                let host = v.trim_start_matches("http://").split(':').next().unwrap();
                assert!(c["services"][host].is_mapping(), "{name}: {k}={v} names no service");
            }
        }
        ids.insert(env["SLUICE_NODE_ID"].clone());
        if name != "init" {
            // The advertised Kafka address is reachable from the host: the
            // listener port is published under the same number.
            let adv = &env["SLUICE_ADVERTISED_KAFKA_ADDR"];
            let port = adv.rsplit(':').next().unwrap();
            let listen = env["SLUICE_KAFKA_ADDR"].rsplit(':').next().unwrap().to_string();
            assert_eq!(port, listen, "{name}: advertised Kafka port is the listener's");
            let published = strings(&c["services"][name]["ports"]);
            assert!(published.contains(&format!("{port}:{port}")), "{name}: {published:?}");
            assert!(kafka.insert(port.to_string()), "{name}: Kafka port {port} used twice");
            let http = &env["SLUICE_ADVERTISED_HTTP_ADDR"];
            assert_eq!(http, &format!("{name}:8080"), "nodes reach {name} by its service name");
        }
    }
    assert_eq!(ids.len(), 4, "every node has its own id: {ids:?}");
}

#[test]
fn prometheus_scrapes_every_node() {
    let p: Value = serde_norway::from_str(&read("infra/prometheus.yml")).expect("prometheus.yml parses");
    let job = &p["scrape_configs"][0];
    assert_eq!(job["metrics_path"].as_str(), Some("/metrics"));
    let targets: BTreeSet<String> = strings(&job["static_configs"][0]["targets"]).into_iter().collect();
    let want: BTreeSet<String> = NODES.iter().map(|n| format!("{n}:8080")).collect();
    assert_eq!(targets, want);
    let c = compose();
    let mounts = strings(&c["services"]["prometheus"]["volumes"]).join(" ");
    assert!(mounts.contains("./prometheus.yml:"), "{mounts}");
    let g = strings(&c["services"]["grafana"]["volumes"]).join(" ");
    assert!(
        g.contains("./grafana/dashboards:") && g.contains("./grafana/provisioning:"),
        "{g}"
    );
    for f in [
        "infra/grafana/provisioning/datasources/prometheus.yml",
        "infra/grafana/provisioning/dashboards/sluice.yml",
    ] {
        let _: Value = serde_norway::from_str(&read(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
    }
}

// ---- metrics -------------------------------------------------------------------

fn rust_sources(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push((p.clone(), std::fs::read_to_string(&p).unwrap()));
        }
    }
}

/// Every series name the code can emit: the first argument of each
/// `telemetry::{count, count_n, gauge, observe}` call (histograms also
/// expose `_bucket`, `_sum` and `_count`).
fn emitted_metrics() -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_sources(&root().join("src"), &mut files);
    let mut out = BTreeSet::new();
    for (_, text) in &files {
        for call in [
            "telemetry::count(",
            "telemetry::count_n(",
            "telemetry::gauge(",
            "telemetry::observe(",
        ] {
            for (i, _) in text.match_indices(call) {
                let rest = text[i + call.len()..].trim_start();
                let Some(rest) = rest.strip_prefix('"') else { continue };
                let name = &rest[..rest.find('"').unwrap()];
                out.insert(name.to_string());
                if call.contains("observe") {
                    for s in ["_bucket", "_sum", "_count"] {
                        out.insert(format!("{name}{s}"));
                    }
                }
            }
        }
    }
    out
}

/// Every `telemetry::{count, count_n, gauge, observe}` call in `src/` with a
/// literal name: (the function, the name).
fn metric_calls() -> Vec<(&'static str, String)> {
    let mut files = Vec::new();
    rust_sources(&root().join("src"), &mut files);
    let mut out = Vec::new();
    for (_, text) in &files {
        for call in ["count", "count_n", "gauge", "observe"] {
            let pattern = format!("telemetry::{call}(");
            for (i, _) in text.match_indices(&pattern) {
                let rest = text[i + pattern.len()..].trim_start();
                let Some(rest) = rest.strip_prefix('"') else { continue };
                out.push((call, rest[..rest.find('"').unwrap()].to_string()));
            }
        }
    }
    out
}

#[test]
fn every_metric_follows_the_naming_scheme() {
    let calls = metric_calls();
    assert!(calls.len() >= 30, "found the metric calls ({})", calls.len());
    for (call, name) in calls {
        assert!(name.starts_with("sluice_"), "{name}: every metric is sluice_-prefixed");
        match call {
            "count" | "count_n" => assert!(name.ends_with("_total"), "counter {name} ends in _total"),
            "observe" => assert!(name.ends_with("_seconds"), "histogram {name} ends in _seconds"),
            _ => {}
        }
    }
}

#[test]
fn the_dashboard_queries_only_metrics_the_code_emits() {
    let emitted = emitted_metrics();
    let d: serde_json::Value =
        serde_json::from_str(&read("infra/grafana/dashboards/sluice.json")).expect("dashboard JSON");
    // PromQL functions, keywords and the labels used in the queries.
    let promql: BTreeSet<&str> = [
        "sum",
        "by",
        "rate",
        "increase",
        "histogram_quantile",
        "le",
        "instance",
        "job",
        "kind",
        "status",
        "op",
        "outcome",
        "stream",
        "max",
    ]
    .into();
    let mut used = BTreeSet::new();
    let panels = d["panels"].as_array().expect("panels");
    assert!(panels.len() >= 10, "the dashboard has its panels");
    for p in panels {
        for t in p["targets"].as_array().expect("targets") {
            let expr = t["expr"].as_str().expect("expr");
            for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                if word.is_empty() || word.starts_with(|c: char| c.is_ascii_digit()) || promql.contains(word) {
                    continue;
                }
                assert!(
                    emitted.contains(word),
                    "panel {:?} queries {word}, which no code emits",
                    p["title"]
                );
                used.insert(word.to_string());
            }
        }
    }
    // The series operations.md asks for are on the dashboard.
    for m in [
        "sluice_appended_records_total",
        "sluice_appended_bytes_total",
        "sluice_read_bytes_total",
        "sluice_append_seconds_bucket",
        "sluice_wal_put_seconds_bucket",
        "sluice_wal_put_bytes_total",
        "sluice_flush_seconds_bucket",
        "sluice_meta_append_seconds_bucket",
        "sluice_meta_append_conflicts_total",
        "sluice_buffered_bytes",
        "sluice_open_streams",
        "sluice_lease_holder",
        "sluice_nodes_fenced_total",
        "sluice_wal_takeovers_total",
        "sluice_wal_takeover_seconds_bucket",
        "sluice_wal_segments_deleted_total",
        "sluice_gc_deleted_objects_total",
        "sluice_retention_trims_total",
    ] {
        assert!(used.contains(m), "the dashboard does not show {m}");
    }
}

#[test]
fn the_metrics_named_in_the_docs_exist() {
    let emitted = emitted_metrics();
    let doc = read("docs/operations.md");
    let mut named = 0;
    for chunk in doc.split('`').skip(1).step_by(2) {
        let name = chunk.split('{').next().unwrap();
        let looks_like_metric = name.starts_with(|c: char| c.is_ascii_lowercase())
            && name.chars().all(|c| c.is_ascii_lowercase() || c == '_')
            && ["_total", "_seconds", "_bytes", "open_streams", "lease_holder"]
                .iter()
                .any(|s| name.ends_with(s));
        if looks_like_metric {
            named += 1;
            assert!(
                emitted.contains(name),
                "docs/operations.md names {name}, which no code emits"
            );
        }
    }
    assert!(named >= 15, "docs/operations.md lists the metrics ({named} found)");
}

// ---- Terraform ---------------------------------------------------------------

fn terraform() -> Vec<(String, Body)> {
    let mut out = Vec::new();
    let mut names: Vec<PathBuf> = std::fs::read_dir(root().join("terraform"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "tf"))
        .collect();
    names.sort();
    assert!(names.len() >= 5, "the module is split by concern: {names:?}");
    for p in names {
        let text = std::fs::read_to_string(&p).unwrap();
        let body = hcl::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        out.push((p.file_name().unwrap().to_string_lossy().into_owned(), body));
    }
    out
}

fn labels(b: &Block) -> Vec<&str> {
    b.labels().iter().map(|l| l.as_str()).collect()
}

/// The top-level block `kind "a" "b"` of the module.
fn block<'a>(tf: &'a [(String, Body)], kind: &str, l: &[&str]) -> &'a Block {
    tf.iter()
        .flat_map(|(_, b)| b.blocks())
        .find(|b| b.identifier() == kind && labels(b) == l)
        .unwrap_or_else(|| panic!("terraform has no {kind} {l:?}"))
}

fn attr<'a>(b: &'a Body, key: &str) -> &'a Expression {
    b.attributes()
        .find(|a| a.key() == key)
        .map(|a| a.expr())
        .unwrap_or_else(|| panic!("no attribute {key}"))
}

fn string(e: &Expression) -> String {
    match e {
        Expression::String(s) => s.clone(),
        other => panic!("{other:?} is not a literal string"),
    }
}

fn sub<'a>(b: &'a Body, kind: &str) -> Vec<&'a Body> {
    b.blocks()
        .filter(|x| x.identifier() == kind)
        .map(|x| x.body())
        .collect()
}

/// Every object key anywhere below `e`.
fn object_keys(e: &Expression, out: &mut BTreeSet<String>) {
    match e {
        Expression::Object(o) => {
            for (k, v) in o {
                match k {
                    ObjectKey::Identifier(i) => {
                        out.insert(i.as_str().to_string());
                    }
                    ObjectKey::Expression(Expression::String(s)) => {
                        out.insert(s.clone());
                    }
                    ObjectKey::Expression(x) => object_keys(x, out),
                    other => panic!("unexpected object key {other:?}"),
                }
                object_keys(v, out);
            }
        }
        Expression::Array(a) => a.iter().for_each(|x| object_keys(x, out)),
        Expression::FuncCall(f) => f.args.iter().for_each(|x| object_keys(x, out)),
        Expression::Parenthesis(x) => object_keys(x, out),
        Expression::Conditional(c) => {
            object_keys(&c.true_expr, out);
            object_keys(&c.false_expr, out);
        }
        Expression::ForExpr(f) => {
            object_keys(&f.collection_expr, out);
            object_keys(&f.value_expr, out);
        }
        _ => {}
    }
}

fn body_object_keys(b: &Body, out: &mut BTreeSet<String>) {
    for a in b.attributes() {
        object_keys(a.expr(), out);
    }
    for x in b.blocks() {
        body_object_keys(x.body(), out);
    }
}

#[test]
fn terraform_table_has_the_key_schema_the_metadata_log_creates() {
    let tf = terraform();
    let table = block(&tf, "resource", &["aws_dynamodb_table", "meta"]).body();
    // What the code creates in `DynamoLog::ensure_table`.
    let code = read("src/meta/dynamo_log.rs");
    let ensure = function_body(&code, "ensure_table");
    let mut types = BTreeMap::new();
    let mut keys = BTreeMap::new();
    for (i, _) in ensure.match_indices(".attribute_name(\"") {
        let rest = &ensure[i + ".attribute_name(\"".len()..];
        let name = rest[..rest.find('"').unwrap()].to_string();
        let next = rest.split_once(')').unwrap().1.trim_start();
        if let Some(t) = next.strip_prefix(".attribute_type(ScalarAttributeType::") {
            types.insert(name, t[..t.find(')').unwrap()].to_string());
        } else if let Some(k) = next.strip_prefix(".key_type(KeyType::") {
            keys.insert(k[..k.find(')').unwrap()].to_string(), name);
        }
    }
    assert_eq!(keys.len(), 2, "ensure_table declares a hash and a range key: {keys:?}");
    assert_eq!(string(attr(table, "hash_key")), keys["Hash"]);
    assert_eq!(string(attr(table, "range_key")), keys["Range"]);
    let tf_types: BTreeMap<String, String> = sub(table, "attribute")
        .into_iter()
        .map(|a| (string(attr(a, "name")), string(attr(a, "type"))))
        .collect();
    assert_eq!(tf_types, types, "attribute types (code: {types:?})");
    assert!(ensure.contains("BillingMode::PayPerRequest"));
    assert_eq!(string(attr(table, "billing_mode")), "PAY_PER_REQUEST");
    let pitr = sub(table, "point_in_time_recovery");
    assert_eq!(pitr.len(), 1);
    assert!(
        matches!(attr(pitr[0], "enabled"), Expression::Bool(true)),
        "point-in-time recovery is on"
    );
    // The table's item layout the code uses: pk is "<cluster>#log".
    assert!(code.contains(".item(\"pk\", AttributeValue::S(") && code.contains(".item(\"sk\", AttributeValue::N("));
}

/// The text of `fn name`'s body (up to the closing brace at its indentation).
fn function_body<'a>(code: &'a str, name: &str) -> &'a str {
    let start = code
        .find(&format!("fn {name}("))
        .unwrap_or_else(|| panic!("no fn {name}"));
    let line_start = code[..start].rfind('\n').map_or(0, |i| i + 1);
    let indent = &code[line_start..start]
        .chars()
        .take_while(|c| *c == ' ')
        .collect::<String>();
    let close = format!("\n{indent}}}\n");
    let end = start + code[start..].find(&close).expect("closing brace");
    &code[start..end]
}

const DYNAMODB_OPS: [(&str, &str); 15] = [
    ("put_item", "PutItem"),
    ("get_item", "GetItem"),
    ("update_item", "UpdateItem"),
    ("delete_item", "DeleteItem"),
    ("query", "Query"),
    ("scan", "Scan"),
    ("batch_get_item", "BatchGetItem"),
    ("batch_write_item", "BatchWriteItem"),
    ("transact_get_items", "TransactGetItems"),
    ("transact_write_items", "TransactWriteItems"),
    ("create_table", "CreateTable"),
    ("describe_table", "DescribeTable"),
    ("delete_table", "DeleteTable"),
    ("update_table", "UpdateTable"),
    ("list_tables", "ListTables"),
];

/// `object_store::ObjectStore` methods → the IAM actions their requests need.
fn object_store_actions(method: &str) -> &'static [&'static str] {
    match method {
        "put" | "put_opts" => &["s3:PutObject"],
        "get" | "get_opts" | "get_range" | "get_ranges" | "head" => &["s3:GetObject"],
        "delete" | "delete_stream" => &["s3:DeleteObject"],
        "list" | "list_with_offset" | "list_with_delimiter" => &["s3:ListBucket"],
        "copy" | "copy_if_not_exists" | "rename" | "rename_if_not_exists" => &["s3:GetObject", "s3:PutObject"],
        "put_multipart" | "put_multipart_opts" => &["s3:PutObject", "s3:AbortMultipartUpload"],
        other => panic!("object_store method {other} has no IAM mapping in this test: add one"),
    }
}

/// The IAM actions `sluice serve` needs, read from the code: the
/// `object_store` calls of the S3 backend and the DynamoDB SDK calls of the
/// metadata log. `ensure_table` runs only in `sluice init`.
fn actions_the_code_calls() -> (BTreeSet<String>, BTreeSet<String>) {
    let mut serve = BTreeSet::new();
    let mut init_only = BTreeSet::new();
    let mut files = Vec::new();
    rust_sources(&root().join("src"), &mut files);
    for (path, text) in &files {
        if text.contains("aws_sdk_dynamodb::Client") {
            let ensure = text
                .find("fn ensure_table(")
                .map(|_| function_body(text, "ensure_table"));
            for (method, action) in DYNAMODB_OPS {
                for (i, _) in text.match_indices(&format!(".{method}()")) {
                    let in_init = ensure.is_some_and(|e| {
                        let off = e.as_ptr() as usize - text.as_ptr() as usize;
                        (off..off + e.len()).contains(&i)
                    });
                    let set = if in_init { &mut init_only } else { &mut serve };
                    set.insert(format!("dynamodb:{action}"));
                }
            }
        }
        if text.contains("AmazonS3") {
            // `self.client.<method>(`, possibly split over lines.
            for (i, _) in text.match_indices(".client") {
                let rest = text[i + ".client".len()..].trim_start();
                let Some(rest) = rest.strip_prefix('.') else { continue };
                let method: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if rest[method.len()..].starts_with('(') {
                    for a in object_store_actions(&method) {
                        serve.insert(a.to_string());
                    }
                }
            }
            if text.contains(".with_s3_express(") {
                serve.insert("s3express:CreateSession".to_string());
            }
        }
        let _ = path;
    }
    (serve, init_only)
}

fn policy_actions(doc: &Body) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    fn walk(b: &Body, out: &mut BTreeSet<String>) {
        for a in b.attributes() {
            if a.key() == "actions" {
                let Expression::Array(items) = a.expr() else {
                    panic!("actions must be a literal list")
                };
                for x in items {
                    assert!(out.insert(string(x)), "action {x:?} is granted twice");
                }
            }
        }
        for x in b.blocks() {
            walk(x.body(), out);
        }
    }
    walk(doc, &mut out);
    out
}

#[test]
fn the_task_role_grants_exactly_what_the_code_calls() {
    let (serve, init_only) = actions_the_code_calls();
    // The scan found the calls it should: a scan that finds nothing would
    // make this test vacuous.
    for a in ["s3:PutObject", "s3:GetObject", "dynamodb:PutItem", "dynamodb:Query"] {
        assert!(serve.contains(a), "the code scan misses {a}: {serve:?}");
    }
    assert_eq!(
        init_only,
        ["dynamodb:CreateTable", "dynamodb:DescribeTable"]
            .map(String::from)
            .into(),
        "only table creation is left to `sluice init`"
    );
    let tf = terraform();
    let granted = policy_actions(block(&tf, "data", &["aws_iam_policy_document", "task"]).body());
    let missing: Vec<_> = serve.difference(&granted).collect();
    let extra: Vec<_> = granted.difference(&serve).collect();
    assert!(
        missing.is_empty(),
        "the task role lacks {missing:?}, which the code calls"
    );
    assert!(
        extra.is_empty(),
        "the task role grants {extra:?}, which the code never calls"
    );
    // The role is the task's, and nothing else grants storage actions.
    let task_policy = block(&tf, "resource", &["aws_iam_role_policy", "task"]);
    assert!(format!("{:?}", attr(task_policy.body(), "policy")).contains("task"));
    let policies = tf
        .iter()
        .flat_map(|(_, b)| b.blocks())
        .filter(|b| b.identifier() == "data" && labels(b).first() == Some(&"aws_iam_policy_document"))
        .count();
    assert_eq!(policies, 2, "the task policy and the ECS assume-role policy");
}

#[test]
fn terraform_bucket_is_private_encrypted_and_cleans_up_multipart_uploads() {
    let tf = terraform();
    let pab = block(&tf, "resource", &["aws_s3_bucket_public_access_block", "data"]).body();
    for k in [
        "block_public_acls",
        "block_public_policy",
        "ignore_public_acls",
        "restrict_public_buckets",
    ] {
        assert!(matches!(attr(pab, k), Expression::Bool(true)), "{k} must be true");
    }
    let sse = block(
        &tf,
        "resource",
        &["aws_s3_bucket_server_side_encryption_configuration", "data"],
    );
    assert!(format!("{:?}", sse.body()).contains("AES256"));
    let lc = block(&tf, "resource", &["aws_s3_bucket_lifecycle_configuration", "data"]).body();
    let rule = sub(lc, "rule");
    let abort = sub(rule[0], "abort_incomplete_multipart_upload");
    assert_eq!(abort.len(), 1, "a rule aborts abandoned multipart uploads");
    assert!(
        !tf.iter()
            .flat_map(|(_, b)| b.blocks())
            .any(|b| labels(b).first() == Some(&"aws_s3_bucket_versioning")),
        "versioning stays off"
    );
    // The optional WAL bucket is a directory bucket, named so the code
    // recognises it.
    let wal = block(&tf, "resource", &["aws_s3_directory_bucket", "wal"]).body();
    assert!(format!("{:?}", attr(wal, "bucket")).contains("--x-s3"));
    assert!(read("src/store/s3.rs").contains("bucket.ends_with(\"--x-s3\")"));
}

#[test]
fn terraform_passes_the_nodes_only_flags_the_binary_has() {
    let tf = terraform();
    let flags = serve_env();
    let mut keys = BTreeSet::new();
    for (_, b) in &tf {
        body_object_keys(b, &mut keys);
    }
    let sluice: Vec<&String> = keys.iter().filter(|k| k.starts_with("SLUICE_")).collect();
    assert!(
        sluice.len() >= 8,
        "the task definition sets the node's flags: {sluice:?}"
    );
    for k in sluice {
        assert!(
            flags.contains_key(k),
            "terraform sets {k}, which is not a flag of `sluice serve`"
        );
    }
    // The example variables too.
    let example = hcl::parse(&read("terraform/terraform.tfvars.example")).expect("tfvars example parses");
    let mut ex = BTreeMap::new();
    if let Expression::Object(o) = attr(&example, "environment") {
        for (k, v) in o {
            let ObjectKey::Identifier(k) = k else { panic!("{k:?}") };
            ex.insert(k.as_str().to_string(), string(v));
        }
    }
    assert!(!ex.is_empty());
    validate_settings("terraform.tfvars.example", &ex);
    // Every variable the example sets is declared.
    let declared: BTreeSet<&str> = tf
        .iter()
        .flat_map(|(_, b)| b.blocks())
        .filter(|b| b.identifier() == "variable")
        .map(|b| labels(b)[0])
        .collect();
    for a in example.attributes() {
        assert!(declared.contains(a.key()), "the example sets undeclared {}", a.key());
    }
}

#[test]
fn terraform_health_checks_ask_ready() {
    let tf = terraform();
    // The shared target groups use the `ready_check` local, which asks /ready.
    let ready_check = tf
        .iter()
        .flat_map(|(_, b)| b.blocks())
        .filter(|b| b.identifier() == "locals")
        .find_map(|b| {
            b.body()
                .attributes()
                .find(|a| a.key() == "ready_check")
                .map(|a| a.expr().clone())
        })
        .expect("a ready_check local");
    let Expression::Object(o) = &ready_check else {
        panic!("ready_check is an object")
    };
    let path = o
        .iter()
        .find(|(k, _)| matches!(k, ObjectKey::Identifier(i) if i.as_str() == "path"))
        .map(|(_, v)| string(v));
    assert_eq!(path.as_deref(), Some("/ready"));
    for tg in ["http", "kafka", "node_http", "node_kafka"] {
        let b = block(&tf, "resource", &["aws_lb_target_group", tg]).body();
        assert_eq!(string(attr(b, "target_type")), "ip");
        let check = sub(b, "health_check");
        assert_eq!(check.len(), 1, "{tg} has a health check");
        match attr(check[0], "path") {
            Expression::String(p) => assert_eq!(p, "/ready", "{tg}"),
            other => assert!(format!("{other:?}").contains("ready_check"), "{tg}: {other:?}"),
        }
    }
    let lb = block(&tf, "resource", &["aws_lb", "nlb"]).body();
    assert!(
        matches!(attr(lb, "internal"), Expression::Bool(true)),
        "the load balancer is internal"
    );
    let svc = block(&tf, "resource", &["aws_ecs_service", "node"]).body();
    assert_eq!(string(attr(svc, "launch_type")), "FARGATE");
    assert_eq!(
        sub(svc, "load_balancer").len(),
        4,
        "shared and per-node HTTP and Kafka target groups"
    );
    assert!(
        read("terraform/ecs.tf").contains("GET /ready"),
        "the container health check asks /ready"
    );
}

// ---- docs ----------------------------------------------------------------------

/// Every user page, each linked from the README. `security.md`,
/// `durable-streams.md`, `reliability.md` and `benchmarks.md` are written on
/// other branches.
const PAGES: [&str; 20] = [
    "docs/quickstart.md",
    "docs/architecture.md",
    "docs/failover.md",
    "docs/leases.md",
    "docs/metadata.md",
    "docs/ownership.md",
    "docs/transfers.md",
    "docs/wal.md",
    "docs/data-objects.md",
    "docs/http-api.md",
    "docs/kafka.md",
    "docs/durable-streams.md",
    "docs/configuration.md",
    "docs/security.md",
    "docs/docker.md",
    "docs/aws.md",
    "docs/operations.md",
    "docs/benchmarks.md",
    "docs/reliability.md",
    "docs/testing-services.md",
];

#[test]
fn every_docs_page_exists_and_the_readme_links_it() {
    let readme = read("README.md");
    let missing: Vec<&str> = PAGES.iter().copied().filter(|p| !root().join(p).exists()).collect();
    assert!(missing.is_empty(), "missing pages: {missing:?}");
    for p in PAGES {
        assert!(readme.contains(&format!("]({p})")), "README.md does not link {p}");
        assert!(read(p).starts_with("# "), "{p} starts with a title");
    }
}

#[test]
fn relative_links_in_the_docs_resolve() {
    let mut pages: Vec<PathBuf> = vec![root().join("README.md")];
    for dir in ["docs", "infra", "terraform"] {
        for e in std::fs::read_dir(root().join(dir)).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "md") {
                pages.push(p);
            }
        }
    }
    for page in pages {
        let text = std::fs::read_to_string(&page).unwrap();
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let target = &rest[..rest.find(')').unwrap_or(0)];
            let target = target.split('#').next().unwrap();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            // Pages written on other branches; the page test above requires them.
            let path = page.parent().unwrap().join(target);
            if !path.exists()
                && ["security.md", "durable-streams.md"]
                    .iter()
                    .any(|o| target.ends_with(o))
            {
                continue;
            }
            assert!(path.exists(), "{}: link to {target} does not resolve", page.display());
        }
    }
}

#[test]
fn the_configuration_page_lists_every_flag() {
    let doc = read("docs/configuration.md");
    let cmd = ServeArgs::augment_args(clap::Command::new("serve"));
    let mut missing = Vec::new();
    for a in cmd.get_arguments() {
        let Some(long) = a.get_long() else { continue };
        if !doc.contains(&format!("--{long}")) {
            missing.push(long.to_string());
        }
        if let Some(env) = a.get_env() {
            if !doc.contains(env.to_str().unwrap()) {
                missing.push(env.to_string_lossy().into_owned());
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/configuration.md does not document {missing:?}"
    );
}
