//! `sluice serve`: start a node, serve HTTP, and shut down cleanly on
//! SIGTERM or Ctrl-C. A node that is fenced exits non-zero so a supervisor
//! restarts it at a new epoch.

use crate::config::Config;
use crate::node::{Node, Phase};
use std::sync::Arc;
use tokio::net::TcpListener;

/// How `serve` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Clean shutdown after a signal.
    Stopped,
    /// Fenced or replaced: restart me.
    Fenced,
}

pub async fn serve(config: Config) -> anyhow::Result<Exit> {
    let listener = TcpListener::bind(&config.http_addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on --http-addr {}: {e}", config.http_addr))?;
    let kafka = TcpListener::bind(&config.kafka_addr)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen on --kafka-addr {}: {e}", config.kafka_addr))?;
    let mut config = config;
    if config.http_addr.ends_with(":0") {
        // An ephemeral port is advertised as bound.
        config.advertised_http_addr = listener.local_addr()?.to_string();
    }
    if config.kafka_addr.ends_with(":0") {
        config.advertised_kafka_addr = kafka.local_addr()?.to_string();
    }
    let node = Node::start(config).await?;
    let tls = node.config.tls.is_some();
    tracing::info!(addr = %listener.local_addr()?, node = %node.id, epoch = %node.epoch, tls, "serving HTTP");
    tracing::info!(addr = %kafka.local_addr()?, advertised = %node.config.advertised_kafka_addr, tls, "serving Kafka");
    run(node, listener, Some(kafka)).await
}

/// Serve `node` on `listener` (HTTP) and `kafka` until a signal or a fence.
pub async fn run(node: Arc<Node>, listener: TcpListener, kafka: Option<TcpListener>) -> anyhow::Result<Exit> {
    let services = node.services();
    let app = crate::http::router(services.clone());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (kafka_stop_tx, kafka_stop_rx) = tokio::sync::watch::channel(false);
    let transport = node.config.transport();
    let kafka = kafka.map(|l| {
        let opts = crate::kafka::Options::from_config(&node.config);
        tokio::spawn(crate::kafka::serve_with(
            services,
            l,
            opts,
            transport.clone(),
            kafka_stop_rx,
        ))
    });
    let http = tokio::spawn(crate::net::serve_http(listener, app, transport, async {
        let _ = stop_rx.await;
    }));
    let server = async move {
        let _ = http.await;
        if let Some(k) = kafka {
            let _ = k.await;
        }
    };
    let mut phase = node.watch_phase();
    tokio::select! {
        _ = shutdown_signal() => {
            let stopped = async move {
                let _ = stop_tx.send(());
                let _ = kafka_stop_tx.send(true);
                server.await;
            };
            node.shutdown(stopped).await;
            Ok(Exit::Stopped)
        }
        _ = phase.wait_for(|p| *p == Phase::Fenced) => {
            tracing::error!("node was fenced; exiting so a supervisor restarts it at a new epoch");
            Ok(Exit::Fenced)
        }
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
