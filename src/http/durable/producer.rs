//! Idempotent producers: whether an append with `Producer-Id`,
//! `Producer-Epoch` and `Producer-Seq` is new, a retry, or refused.

use super::headers::Producer;
use crate::meta::durable::ProducerState;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Append it.
    Accept,
    /// Already appended; `last_seq` is the highest sequence accepted.
    Duplicate { last_seq: u64 },
    /// The epoch is older than the producer's current one (403).
    StaleEpoch { current: u64 },
    /// A newer epoch must start at sequence 0 (400).
    EpochNotAtZero,
    /// The sequence skips ahead (409).
    Gap { expected: u64, received: u64 },
}

pub fn judge(state: Option<&ProducerState>, p: &Producer) -> Verdict {
    let Some(s) = state else {
        return if p.seq == 0 {
            Verdict::Accept
        } else {
            Verdict::Gap {
                expected: 0,
                received: p.seq,
            }
        };
    };
    if p.epoch < s.epoch {
        return Verdict::StaleEpoch { current: s.epoch };
    }
    if p.epoch > s.epoch {
        return if p.seq == 0 {
            Verdict::Accept
        } else {
            Verdict::EpochNotAtZero
        };
    }
    match p.seq {
        n if n <= s.seq => Verdict::Duplicate { last_seq: s.seq },
        n if n == s.seq + 1 => Verdict::Accept,
        n => Verdict::Gap {
            expected: s.seq + 1,
            received: n,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(epoch: u64, seq: u64) -> Producer {
        Producer {
            id: "p".into(),
            epoch,
            seq,
        }
    }

    fn at(epoch: u64, seq: u64) -> ProducerState {
        ProducerState {
            epoch,
            seq,
            ..Default::default()
        }
    }

    #[test]
    fn a_new_producer_starts_at_zero() {
        assert_eq!(judge(None, &p(0, 0)), Verdict::Accept);
        assert_eq!(judge(None, &p(3, 0)), Verdict::Accept);
        assert_eq!(
            judge(None, &p(0, 2)),
            Verdict::Gap {
                expected: 0,
                received: 2
            }
        );
    }

    #[test]
    fn sequences_follow_on_retries_are_duplicates_gaps_are_refused() {
        let s = at(0, 2);
        assert_eq!(judge(Some(&s), &p(0, 3)), Verdict::Accept);
        assert_eq!(judge(Some(&s), &p(0, 1)), Verdict::Duplicate { last_seq: 2 });
        assert_eq!(judge(Some(&s), &p(0, 2)), Verdict::Duplicate { last_seq: 2 });
        assert_eq!(
            judge(Some(&s), &p(0, 5)),
            Verdict::Gap {
                expected: 3,
                received: 5
            }
        );
    }

    #[test]
    fn epochs_fence_older_writers() {
        let s = at(1, 4);
        assert_eq!(judge(Some(&s), &p(0, 5)), Verdict::StaleEpoch { current: 1 });
        assert_eq!(judge(Some(&s), &p(2, 0)), Verdict::Accept);
        assert_eq!(judge(Some(&s), &p(2, 5)), Verdict::EpochNotAtZero);
    }
}
