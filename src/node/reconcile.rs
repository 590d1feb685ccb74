//! Reconciliation: after every applied entry the node opens the streams the
//! view gives this incarnation, drops those it no longer owns, starts
//! handing over those being transferred away, and stops for good when its
//! own row is fenced or replaced.

use super::{Node, Phase};
use crate::ids::{Offset, StreamEpoch, StreamId};
use crate::meta::producers::ProducerTable;
use crate::meta::StreamState;
use crate::stream::partition::OpenStream;
use std::collections::BTreeMap;
use std::sync::Arc;
use tracing::Instrument as _;

impl Node {
    /// Open what the view says this incarnation owns; drop what it no longer does.
    pub(super) fn reconcile(&self) {
        let view = self.meta.view();
        match view.nodes.get(&self.id) {
            Some(row) if row.epoch == self.epoch && !row.fenced => {}
            Some(row) if row.epoch == self.epoch => {
                drop(view);
                return self.stop_fenced("our row is fenced in the view");
            }
            _ => {
                drop(view);
                return self.stop_fenced("a newer registration replaced this incarnation");
            }
        }
        // Producer state is cloned from the view only for streams being opened.
        let opened: BTreeMap<StreamId, StreamEpoch> = self
            .streams
            .read()
            .unwrap()
            .iter()
            .map(|(id, s)| (*id, s.epoch))
            .collect();
        let wanted_row = |id: &StreamId, row: &crate::meta::StreamRow| {
            let producers = if opened.get(id) == Some(&row.stream_epoch) {
                ProducerTable::default()
            } else {
                row.producers.clone()
            };
            (row.stream_epoch, row.committed_end, row.topic_name.clone(), producers)
        };
        let mut wanted: BTreeMap<StreamId, (StreamEpoch, Offset, String, ProducerTable)> = BTreeMap::new();
        let mut leaving = Vec::new();
        for (id, row) in &view.streams {
            match &row.state {
                StreamState::Open { node, node_epoch } if node == &self.id && *node_epoch == self.epoch => {
                    wanted.insert(*id, wanted_row(id, row));
                }
                // Still ours while we hand it over: reads go on, appends stop.
                StreamState::Transferring { from, from_epoch, .. } if from == &self.id && *from_epoch == self.epoch => {
                    wanted.insert(*id, wanted_row(id, row));
                    leaving.push(*id);
                }
                _ => {}
            }
        }
        drop(view);
        let mut streams = self.streams.write().unwrap();
        streams.retain(|id, s| {
            let keep = wanted.get(id).is_some_and(|(e, _, _, _)| *e == s.epoch);
            if !keep {
                s.stop_accepting();
                tracing::info!(stream = %id, "stream no longer ours");
            }
            keep
        });
        for (id, (epoch, committed_end, topic, producers)) in wanted {
            let s = streams.entry(id).or_insert_with(|| {
                tracing::info!(stream = %id, stream_epoch = %epoch, %committed_end, producers = producers.len(), "opening stream");
                Arc::new(OpenStream::open(
                    id,
                    topic,
                    epoch,
                    committed_end,
                    producers,
                    self.budget.clone(),
                ))
            });
            if !leaving.contains(&id) && self.phase() == Phase::Ready && !self.handing_off.lock().unwrap().contains(&id)
            {
                s.resume_accepting();
            }
        }
        for id in leaving {
            let Some(s) = streams.get(&id).cloned() else { continue };
            if self.handing_off.lock().unwrap().insert(id) {
                if let Some(me) = self.me.get().and_then(std::sync::Weak::upgrade) {
                    tracing::info!(stream = %id, "handing stream over to its transfer target");
                    tokio::spawn(me.hand_off(s).instrument(tracing::info_span!("hand_off", stream = %id)));
                }
            }
        }
        crate::telemetry::gauge("sluice_open_streams", &[], streams.len() as f64);
    }
}

pub(super) async fn reconcile_loop(node: Arc<Node>) {
    let mut applied = node.meta.subscribe();
    loop {
        node.reconcile();
        if node.phase() == Phase::Fenced || applied.changed().await.is_err() {
            return;
        }
    }
}
