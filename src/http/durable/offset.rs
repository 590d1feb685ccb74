//! Offsets as the protocol sees them, and long-poll cursors.
//!
//! A position in a stream is the Sluice offset of the next record, written
//! as 20 decimal digits (`00000000000000000042`): opaque to clients, but
//! ordered the same way as strings and as numbers, as the protocol requires.
//! `-1` is the start of the stream and `now` its current end.

use crate::ids::Offset;

/// Where a read starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// `-1` or no `offset`: the beginning.
    Beginning,
    /// `now`: the current end.
    Now,
    At(Offset),
}

const DIGITS: usize = 20;

pub fn token(o: Offset) -> String {
    format!("{:0width$}", o.get(), width = DIGITS)
}

/// Parses an `offset` query value.
pub fn parse(s: &str) -> Result<Start, String> {
    match s {
        "-1" => Ok(Start::Beginning),
        "now" => Ok(Start::Now),
        _ if s.len() == DIGITS && s.bytes().all(|b| b.is_ascii_digit()) => s
            .parse::<u64>()
            .map(|n| Start::At(Offset(n)))
            .map_err(|_| format!("offset {s:?} is out of range")),
        _ => Err(format!(
            "offset {s:?} is not -1, now, or an offset this server returned"
        )),
    }
}

/// Seconds per cursor interval: responses in the same interval share a
/// cursor, so caches can collapse identical long polls.
const CURSOR_INTERVAL_SECS: u64 = 20;

/// The cursor to return at `now_secs` to a client that sent `echoed`: the
/// current interval, or one past the echoed cursor when that is not older
/// (so a client never sees the same cursor twice in a row).
pub fn cursor(now_secs: u64, echoed: Option<&str>) -> u64 {
    let current = now_secs / CURSOR_INTERVAL_SECS;
    match echoed.and_then(|c| c.parse::<u64>().ok()) {
        Some(c) if c >= current => c.saturating_add(1),
        _ => current,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_sort_like_offsets() {
        for n in [0u64, 1, 9, 10, 41, u64::MAX] {
            assert_eq!(parse(&token(Offset(n))), Ok(Start::At(Offset(n))));
        }
        let mut toks: Vec<String> = [100u64, 9, 10, 0].iter().map(|n| token(Offset(*n))).collect();
        toks.sort();
        assert_eq!(
            toks,
            vec![
                token(Offset(0)),
                token(Offset(9)),
                token(Offset(10)),
                token(Offset(100))
            ]
        );
    }

    #[test]
    fn sentinels_parse() {
        assert_eq!(parse("-1"), Ok(Start::Beginning));
        assert_eq!(parse("now"), Ok(Start::Now));
    }

    #[test]
    fn anything_else_is_refused() {
        for bad in [
            "",
            "0",
            "42",
            "0,1",
            "0 1",
            "../x",
            "00000000000000000001\n",
            "-2",
            "NOW",
            "99999999999999999999",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn cursors_advance_past_an_echoed_one() {
        assert_eq!(cursor(100, None), 5);
        assert_eq!(cursor(100, Some("3")), 5);
        assert_eq!(cursor(100, Some("5")), 6);
        assert_eq!(cursor(100, Some("9")), 10);
        assert_eq!(cursor(100, Some("junk")), 5);
    }
}
