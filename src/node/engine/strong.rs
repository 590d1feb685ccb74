//! Strong reads ([`Consistency::Strong`]): a read is served as usual, then
//! the node reads the metadata log to its end and confirms that the stream
//! is still placed as it was when the read began. Only then is the answer
//! given.
//!
//! Why this is linearizable: every append to a stream is made by the owner
//! its log row names, and a new owner appends only after the log says so.
//! If the row (owner, node epoch, stream epoch) is the same at the end of a
//! log read that started after the read was served, no other node appended
//! before the serving moment, so the serving owner's high watermark was the
//! log's end then. A closed stream is appended to by nobody: the same
//! committed end means the same log. A zombie (a node fenced without knowing
//! it yet) finds its row changed and refuses.
//!
//! Confirming after serving, not before: a check first and a read second
//! would leave a window in which a takeover completes and a new owner
//! acknowledges records the stale read cannot show.

use super::super::Node;
use crate::api::{ApiError, ApiResult};
use crate::ids::{NodeId, Offset, StreamEpoch, StreamId};
use crate::meta::view::StreamRow;
use crate::meta::StreamState;

/// How long a strong read waits for the metadata log before refusing.
const CONFIRM_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// What a strong read must find unchanged in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Placement {
    state: Option<StreamState>,
    stream_epoch: StreamEpoch,
    /// The committed end, for a stream no node has open (its only end).
    closed_end: Option<Offset>,
    /// The epoch of this node's open copy of the stream, if it has one.
    local_epoch: Option<StreamEpoch>,
}

impl Placement {
    /// The placement a row shows (`None`: the stream is unknown).
    pub(super) fn of(row: Option<&StreamRow>) -> Self {
        match row {
            None => Self {
                state: None,
                stream_epoch: StreamEpoch(0),
                closed_end: None,
                local_epoch: None,
            },
            Some(r) => Self {
                state: Some(r.state.clone()),
                stream_epoch: r.stream_epoch,
                closed_end: matches!(r.state, StreamState::Closed).then_some(r.committed_end),
                local_epoch: None,
            },
        }
    }

    /// With this node's open copy of the stream at `epoch`.
    pub(super) fn with_local(self, epoch: Option<StreamEpoch>) -> Self {
        Self {
            local_epoch: epoch,
            ..self
        }
    }

    /// False when the log names `me` the owner at a stream epoch other than
    /// that of the copy `me` holds open: a read served from that copy could
    /// be stale even though the placement did not move.
    pub(super) fn served_at_owned_epoch(&self, me: &NodeId) -> bool {
        match (&self.state, self.local_epoch) {
            (Some(StreamState::Open { node, .. }), Some(local)) if node == me => local == self.stream_epoch,
            _ => true,
        }
    }
}

impl Node {
    /// The stream's placement in this node's view now.
    pub(super) fn placement(&self, stream: StreamId) -> Placement {
        let local = self.open_stream(stream).map(|s| s.epoch);
        Placement::of(self.meta.view().streams.get(&stream)).with_local(local)
    }

    /// Read the log to its end and check that `stream` is placed as
    /// `before` (taken before the read was served) says.
    pub(super) async fn confirm_placement(&self, stream: StreamId, before: &Placement) -> ApiResult<()> {
        if !self.meta.sync(CONFIRM_WAIT).await {
            crate::telemetry::count("sluice_strong_reads_total", &[("outcome", "log_unreadable")]);
            return Err(ApiError::unavailable(
                "a strong read could not read the metadata log to confirm the stream's owner; retry",
            ));
        }
        let now = self.placement(stream);
        if &now != before || !now.served_at_owned_epoch(&self.id) {
            crate::telemetry::count("sluice_strong_reads_total", &[("outcome", "moved")]);
            return Err(ApiError::unavailable(format!(
                "stream {stream} moved while a strong read was served ({}); retry",
                describe(&now)
            )));
        }
        crate::telemetry::count("sluice_strong_reads_total", &[("outcome", "confirmed")]);
        Ok(())
    }
}

fn describe(p: &Placement) -> String {
    match &p.state {
        Some(StreamState::Open { node, node_epoch }) => {
            format!(
                "now open on {node} at node epoch {} and stream epoch {}",
                node_epoch.0, p.stream_epoch.0
            )
        }
        Some(other) => format!("now {other:?}"),
        None => "now deleted".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::NodeEpoch;

    fn row(state: StreamState, epoch: u64, committed_end: u64) -> StreamRow {
        StreamRow {
            topic_name: "t".into(),
            state,
            stream_epoch: StreamEpoch(epoch),
            committed_end: Offset(committed_end),
            start: Offset(0),
            chunks: vec![],
            producers: Default::default(),
            epoch_starts: vec![],
            compacted_end: Offset(0),
        }
    }

    fn open(node: &str, node_epoch: u64) -> StreamState {
        StreamState::Open {
            node: NodeId::new(node),
            node_epoch: NodeEpoch(node_epoch),
        }
    }

    #[test]
    fn an_open_stream_is_confirmed_by_owner_and_epochs_not_by_its_flushes() {
        let before = Placement::of(Some(&row(open("n1", 3), 7, 100)));
        // A flush moved the committed end: the owner is the same.
        assert_eq!(before, Placement::of(Some(&row(open("n1", 3), 7, 250))));
        // A takeover: another owner, or the same node at a new epoch, or a new stream epoch.
        assert_ne!(before, Placement::of(Some(&row(open("n2", 1), 8, 100))));
        assert_ne!(before, Placement::of(Some(&row(open("n1", 4), 8, 100))));
        assert_ne!(before, Placement::of(Some(&row(open("n1", 3), 8, 100))));
        // Being recovered after a fence.
        let recovering = StreamState::Recovering {
            node: NodeId::new("n1"),
            node_epoch: NodeEpoch(3),
            transfer_to: None,
        };
        assert_ne!(before, Placement::of(Some(&row(recovering, 7, 100))));
        assert_ne!(before, Placement::of(None));
    }

    #[test]
    fn a_local_copy_at_another_epoch_than_the_owned_one_is_not_confirmed() {
        let me = NodeId::new("n1");
        let owned = Placement::of(Some(&row(open("n1", 3), 7, 100)));
        assert!(owned
            .clone()
            .with_local(Some(StreamEpoch(7)))
            .served_at_owned_epoch(&me));
        assert!(!owned
            .clone()
            .with_local(Some(StreamEpoch(6)))
            .served_at_owned_epoch(&me));
        // Forwarded (no local copy), or owned elsewhere: the owner served it.
        assert!(owned.clone().with_local(None).served_at_owned_epoch(&me));
        assert!(owned
            .with_local(Some(StreamEpoch(6)))
            .served_at_owned_epoch(&NodeId::new("n2")));
        // The local copy is part of the placement: one that changed is refused.
        let a = Placement::of(Some(&row(open("n1", 3), 7, 100))).with_local(Some(StreamEpoch(7)));
        assert_ne!(a, Placement::of(Some(&row(open("n1", 3), 7, 100))).with_local(None));
    }

    #[test]
    fn a_closed_stream_is_confirmed_by_its_committed_end() {
        let before = Placement::of(Some(&row(StreamState::Closed, 7, 100)));
        assert_eq!(before, Placement::of(Some(&row(StreamState::Closed, 7, 100))));
        assert_ne!(before, Placement::of(Some(&row(StreamState::Closed, 7, 120))));
        assert_ne!(before, Placement::of(Some(&row(open("n2", 1), 8, 100))));
    }
}
