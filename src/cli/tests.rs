//! The client commands against a real listener serving the HTTP router over
//! the fake engine.

use super::*;
use crate::http::tests::fake::FakeEngine;
use clap::Parser;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    client: ClientArgs,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, clap::Subcommand)]
enum Cmd {
    #[command(subcommand)]
    Topics(TopicsCmd),
    Produce(ProduceArgs),
    Consume(ConsumeArgs),
    #[command(subcommand)]
    Admin(AdminCmd),
}

#[test]
fn the_commands_parse() {
    let cli = Cli::try_parse_from([
        "sluice",
        "topics",
        "create",
        "orders",
        "--partitions",
        "3",
        "--retention-ms",
        "-1",
    ])
    .unwrap();
    assert_eq!(cli.client.url, "http://127.0.0.1:8080");
    match cli.cmd {
        Cmd::Topics(TopicsCmd::Create {
            name,
            partitions,
            retention_ms,
            retention_bytes,
        }) => {
            assert_eq!(
                (name.as_str(), partitions, retention_ms, retention_bytes),
                ("orders", 3, Some(-1), None)
            );
        }
        other => panic!("{other:?}"),
    }
    let cli = Cli::try_parse_from([
        "sluice",
        "--url",
        "http://h:1",
        "produce",
        "t",
        "--key",
        "k",
        "--partition",
        "2",
    ])
    .unwrap();
    assert_eq!(cli.client.url, "http://h:1");
    let Cmd::Produce(p) = cli.cmd else { panic!() };
    assert_eq!(
        (p.topic.as_str(), p.key.as_deref(), p.partition),
        ("t", Some("k"), Some(2))
    );

    let cli = Cli::try_parse_from([
        "sluice", "consume", "t", "--follow", "--offset", "5", "--format", "json", "--limit", "3",
    ])
    .unwrap();
    let Cmd::Consume(c) = cli.cmd else { panic!() };
    assert!(c.follow && !c.from_beginning);
    assert_eq!((c.offset, c.limit, c.format), (Some(5), Some(3), consume::Format::Json));
    assert!(Cli::try_parse_from(["sluice", "consume", "t", "--offset", "1", "--from-beginning"]).is_err());
    assert!(matches!(
        Cli::try_parse_from(["sluice", "admin", "nodes"]).unwrap().cmd,
        Cmd::Admin(AdminCmd::Nodes)
    ));
    for cmd in ["list", "describe x", "delete x"] {
        let args: Vec<&str> = ["sluice", "topics"].into_iter().chain(cmd.split(' ')).collect();
        Cli::try_parse_from(args).unwrap();
    }
    // Every flag documents itself.
    use clap::CommandFactory;
    fn check(cmd: &clap::Command) {
        for arg in cmd.get_arguments() {
            if arg.get_id() != "help" && arg.get_id() != "version" {
                assert!(
                    arg.get_help().is_some(),
                    "{} --{} has no help",
                    cmd.get_name(),
                    arg.get_id()
                );
                if arg.get_long().is_some() {
                    assert!(
                        arg.get_env().is_some(),
                        "{} --{} has no env",
                        cmd.get_name(),
                        arg.get_id()
                    );
                }
            }
        }
        cmd.get_subcommands().for_each(check);
    }
    check(&Cli::command());
}

async fn serve() -> (Arc<FakeEngine>, String) {
    let engine = FakeEngine::new(FakeEngine::default_limits());
    let app = crate::http::router(engine.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (engine, format!("http://{addr}"))
}

fn consume(topic: &str) -> ConsumeArgs {
    ConsumeArgs {
        topic: topic.into(),
        partition: None,
        from_beginning: false,
        offset: None,
        follow: false,
        limit: None,
        format: consume::Format::Value,
    }
}

fn produce(topic: &str) -> ProduceArgs {
    ProduceArgs {
        topic: topic.into(),
        key: None,
        partition: None,
        file: None,
    }
}

#[tokio::test]
async fn topics_commands_round_trip() {
    let (_engine, url) = serve().await;
    let mut out = Vec::new();
    let create = TopicsCmd::Create {
        name: "orders".into(),
        partitions: 2,
        retention_ms: None,
        retention_bytes: None,
    };
    create.clone().run_to(&url, &mut out).await.unwrap();
    TopicsCmd::List.run_to(&url, &mut out).await.unwrap();
    TopicsCmd::Describe { name: "orders".into() }
        .run_to(&url, &mut out)
        .await
        .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("created topic orders with 2 partition(s)"), "{text}");
    assert!(text.contains("NAME    PARTITIONS\norders  2\n"), "{text}");
    assert!(text.contains("PARTITION  OWNER"), "{text}");

    let err = create.run_to(&url, &mut Vec::new()).await.unwrap_err();
    let server = err.downcast_ref::<ServerError>().unwrap();
    assert_eq!(server.code, "topic_exists");
    assert!(err.to_string().contains("topic_exists"), "{err}");

    TopicsCmd::Delete { name: "orders".into() }
        .run_to(&url, &mut Vec::new())
        .await
        .unwrap();
    let err = TopicsCmd::Describe { name: "orders".into() }
        .run_to(&url, &mut Vec::new())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("topic_not_found"), "{err}");
}

#[tokio::test]
async fn produced_lines_are_consumed_back() {
    let (engine, url) = serve().await;
    TopicsCmd::Create {
        name: "t".into(),
        partitions: 3,
        retention_ms: None,
        retention_bytes: None,
    }
    .run_to(&url, &mut Vec::new())
    .await
    .unwrap();
    // 1200 lines: three batches of at most 500.
    let mut input: Vec<u8> = (0..1200).flat_map(|i| format!("line {i}\n").into_bytes()).collect();
    input.extend_from_slice(b"\xff\xfe binary\r\nlast without newline");
    let mut progress = Vec::new();
    let n = produce("t").produce(&url, &input[..], &mut progress).await.unwrap();
    assert_eq!(n, 1202);
    assert_eq!(engine.total_records("t"), 1202);
    assert!(String::from_utf8_lossy(&progress).ends_with("produced 1202 records\n"));

    let mut out = Vec::new();
    assert_eq!(consume("t").consume(&url, &mut out).await.unwrap(), 1202);
    let mut lines: Vec<&[u8]> = out.split(|b| *b == b'\n').filter(|l| !l.is_empty()).collect();
    lines.sort();
    assert!(lines.contains(&&b"\xff\xfe binary"[..]));
    assert!(lines.contains(&&b"last without newline"[..]));
    assert!(lines.contains(&&b"line 1199"[..]));

    let mut out = Vec::new();
    let args = ConsumeArgs {
        partition: Some(1),
        limit: Some(3),
        format: consume::Format::Json,
        ..consume("t")
    };
    assert_eq!(args.consume(&url, &mut out).await.unwrap(), 3);
    let first: serde_json::Value = serde_json::from_slice(out.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(first["partition"], 1);
    assert_eq!(first["offset"], 0);
}

#[tokio::test]
async fn keyed_produce_goes_to_one_partition() {
    let (engine, url) = serve().await;
    TopicsCmd::Create {
        name: "t".into(),
        partitions: 4,
        retention_ms: None,
        retention_bytes: None,
    }
    .run_to(&url, &mut Vec::new())
    .await
    .unwrap();
    let args = ProduceArgs {
        key: Some("user-1".into()),
        ..produce("t")
    };
    args.produce(&url, &b"a\nb\nc\n"[..], &mut Vec::new()).await.unwrap();
    let p = crate::batch::partition_for_key(b"user-1", 4);
    assert_eq!(engine.records("t", p).len(), 3);
}

#[tokio::test]
async fn produce_fails_with_the_servers_message() {
    let (_engine, url) = serve().await;
    let err = produce("missing")
        .produce(&url, &b"a\n"[..], &mut Vec::new())
        .await
        .unwrap_err();
    let text = format!("{err:#}");
    assert!(
        text.contains("topic_not_found") && text.contains("records 1..1"),
        "{text}"
    );
}

#[tokio::test]
async fn produce_retries_while_the_partition_is_being_placed() {
    let (engine, url) = serve().await;
    TopicsCmd::Create {
        name: "t".into(),
        partitions: 1,
        retention_ms: None,
        retention_bytes: None,
    }
    .run_to(&url, &mut Vec::new())
    .await
    .unwrap();
    engine.fail_appends(
        None,
        Some(crate::api::ApiError::unavailable("stream t/0 is being placed")),
    );
    let producing = {
        let url = url.clone();
        tokio::spawn(async move { produce("t").produce(&url, &b"a\nb\n"[..], &mut Vec::new()).await })
    };
    // Refused until the partition has an owner.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!producing.is_finished(), "a retryable refusal is retried");
    engine.fail_appends(None, None);
    assert_eq!(producing.await.unwrap().unwrap(), 2);
    let mut out = Vec::new();
    ConsumeArgs {
        from_beginning: true,
        ..consume("t")
    }
    .consume(&url, &mut out)
    .await
    .unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), "a\nb\n", "appended once");
}

#[tokio::test]
async fn follow_tails_new_records_and_reconnects_after_unavailable() {
    let (engine, url) = serve().await;
    TopicsCmd::Create {
        name: "t".into(),
        partitions: 1,
        retention_ms: None,
        retention_bytes: None,
    }
    .run_to(&url, &mut Vec::new())
    .await
    .unwrap();
    produce("t")
        .produce(&url, &b"old\n"[..], &mut Vec::new())
        .await
        .unwrap();

    let follower = {
        let url = url.clone();
        tokio::spawn(async move {
            let mut out = Vec::new();
            let args = ConsumeArgs {
                follow: true,
                limit: Some(3),
                ..consume("t")
            };
            args.consume(&url, &mut out).await.map(|n| (n, out))
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    produce("t")
        .produce(&url, &b"new 1\n"[..], &mut Vec::new())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The node "moves" the stream: the subscription ends with unavailable;
    // the client reconnects with Last-Event-ID and misses nothing.
    engine.fail_reads(Some(crate::api::ApiError::unavailable("moving")));
    produce("t")
        .produce(&url, &b"new 2\n"[..], &mut Vec::new())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    engine.fail_reads(None);
    produce("t")
        .produce(&url, &b"new 3\n"[..], &mut Vec::new())
        .await
        .unwrap();

    let (n, out) = tokio::time::timeout(Duration::from_secs(20), follower)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(n, 3);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "new 1\nnew 2\nnew 3\n",
        "follow starts at the end"
    );
}

#[tokio::test]
async fn admin_nodes_prints_a_table() {
    let (_engine, url) = serve().await;
    let mut out = Vec::new();
    AdminCmd::Nodes.run_to(&url, &mut out).await.unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.starts_with("NODE"), "{text}");
    assert!(text.contains("n1*"), "{text}");
    assert!(text.contains("127.0.0.1:9092"), "{text}");
}
