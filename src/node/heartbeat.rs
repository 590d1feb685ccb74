//! The heartbeat: every `--heartbeat-interval-sec` the node proposes a
//! `Heartbeat`, which bumps the count on its row. Liveness is judged from
//! those counts as applied in the log (`meta::liveness`), never by wall
//! time; a rejected heartbeat means this incarnation was fenced or replaced.

use super::Node;
use crate::meta::{Command, Outcome};
use std::sync::Arc;

pub(super) async fn heartbeat_loop(node: Arc<Node>) {
    let mut tick = tokio::time::interval(node.config.heartbeat_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let hb = Command::Heartbeat {
            node: node.id.clone(),
            epoch: node.epoch,
        };
        match node.meta.propose(hb).await {
            Ok(Outcome::Applied) => crate::telemetry::count("sluice_heartbeats_total", &[("outcome", "applied")]),
            Ok(Outcome::Rejected(r)) => {
                crate::telemetry::count("sluice_heartbeats_total", &[("outcome", "rejected")]);
                node.stop_fenced(&format!("heartbeat rejected: {r}"));
                return;
            }
            Ok(_) => {}
            Err(e) => {
                crate::telemetry::count("sluice_heartbeats_total", &[("outcome", "unavailable")]);
                tracing::warn!(error = %e, "heartbeat did not land");
            }
        }
    }
}
