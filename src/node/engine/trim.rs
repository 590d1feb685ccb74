//! Moving a partition's start up (Kafka's DeleteRecords) on [`Node`], for
//! [`Records::delete_before`](crate::api::Records::delete_before): the
//! owner checks the offset against its high watermark, and proposes
//! `TrimStream` once the records below it are in committed chunks (the
//! view never starts a stream past its committed end), asking its flusher
//! for the tail first when they are not.

use super::super::{flusher, Node};
use super::meta_error;
use crate::api::{ApiError, ApiResult, ErrorCode};
use crate::ids::Offset;
use crate::meta::{Command, Outcome, Rejection};
use std::time::Duration;

/// The longest a trim waits for its records to be flushed.
const FLUSH_WAIT: Duration = Duration::from_secs(30);

impl Node {
    pub(super) async fn trim_before(&self, topic: &str, partition: u32, before: Option<Offset>) -> ApiResult<Offset> {
        let stream = self.resolve(topic, partition)?;
        let Some(open) = self.open_stream_soon(stream).await else {
            return Err(self.not_here(stream));
        };
        let hw = open.high_watermark();
        let target = before.unwrap_or(hw);
        if target > hw {
            return Err(ApiError {
                code: ErrorCode::OffsetOutOfRange,
                message: format!("cannot delete records before {target}: the high watermark is {hw}"),
                start_offset: None,
            });
        }
        let deadline = tokio::time::Instant::now() + FLUSH_WAIT;
        loop {
            let mut applied = self.meta.subscribe();
            let (start, committed_end) = {
                let view = self.meta.view();
                let row = view.streams.get(&stream).ok_or_else(|| self.not_here(stream))?;
                (row.start, row.committed_end)
            };
            if target <= start {
                return Ok(start);
            }
            if committed_end >= target {
                self.check_meta_reachable()?;
                let cmd = Command::TrimStream {
                    stream,
                    new_start: target,
                };
                match self.meta.propose(cmd).await.map_err(meta_error)? {
                    Outcome::Applied => return Ok(target),
                    // Another trim (or retention) moved the start meanwhile: look again.
                    Outcome::Rejected(Rejection::Precondition(_)) => {}
                    other => return Err(ApiError::unavailable(format!("records not deleted: {other:?}"))),
                }
            } else {
                self.flush_soon(&open);
            }
            tokio::select! {
                _ = applied.changed() => {}
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = tokio::time::sleep_until(deadline) => {
                    return Err(ApiError::unavailable(format!(
                        "records before {target} of stream {stream} were not flushed within {FLUSH_WAIT:?}; retry"
                    )))
                }
            }
        }
    }

    /// Flush `stream`'s tail now, in a task of its own: a flush, once
    /// begun, runs to its end whatever happens to the caller.
    fn flush_soon(&self, stream: &std::sync::Arc<crate::stream::partition::OpenStream>) {
        if let Some(me) = self.me.get().and_then(std::sync::Weak::upgrade) {
            let stream = stream.clone();
            tokio::spawn(async move { flusher::flush_now(&me, &[stream]).await });
        }
    }
}
