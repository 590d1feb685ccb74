//! Offsets as the protocol sees them, and long-poll cursors.
//!
//! A position in a stream is the offset of the next record, written as 32
//! decimal digits in two groups of 16 joined by `_`
//! (`0000000000000000_0000000000000042`): opaque to clients, but ordered the
//! same way as strings and as numbers, as the protocol requires. The shape
//! is the one other servers of the protocol use, so the start of any
//! stream, `0000000000000000_0000000000000000`, means the same everywhere.
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

const GROUP: usize = 16;
const GROUP_SCALE: u64 = 10_000_000_000_000_000;

pub fn token(o: Offset) -> String {
    let n = o.get();
    format!("{:016}_{:016}", n / GROUP_SCALE, n % GROUP_SCALE)
}

fn digits(s: &str) -> Option<u64> {
    (s.len() == GROUP && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// Parses an `offset` query value.
pub fn parse(s: &str) -> Result<Start, String> {
    match s {
        "-1" => return Ok(Start::Beginning),
        "now" => return Ok(Start::Now),
        _ => {}
    }
    let groups = s.split_once('_').and_then(|(hi, lo)| Some((digits(hi)?, digits(lo)?)));
    let Some((hi, lo)) = groups else {
        return Err(format!(
            "offset {s:?} is not -1, now, or an offset this server returned"
        ));
    };
    hi.checked_mul(GROUP_SCALE)
        .and_then(|h| h.checked_add(lo))
        .map(|n| Start::At(Offset(n)))
        .ok_or_else(|| format!("offset {s:?} is out of range"))
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
        for n in [0u64, 1, 9, 10, 41, GROUP_SCALE - 1, GROUP_SCALE, u64::MAX] {
            assert_eq!(parse(&token(Offset(n))), Ok(Start::At(Offset(n))));
        }
        let mut toks: Vec<String> = [100u64, 9, 10, 0, GROUP_SCALE]
            .iter()
            .map(|n| token(Offset(*n)))
            .collect();
        toks.sort();
        assert_eq!(
            toks,
            vec![
                token(Offset(0)),
                token(Offset(9)),
                token(Offset(10)),
                token(Offset(100)),
                token(Offset(GROUP_SCALE))
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
            "00000000000000000042",
            "0000000000000000-0000000000000000",
            "0000000000000000_000000000000000",
            "000000000000000_00000000000000000",
            "0000000000000000_0000000000000000_",
            "0000000000000000_000000000000000a",
            "+000000000000000_0000000000000000",
            "0,1",
            "../x",
            "0000000000000000_0000000000000001\n",
            "-2",
            "NOW",
            "9999999999999999_9999999999999999",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_shared_start_token_is_offset_zero() {
        assert_eq!(token(Offset(0)), "0000000000000000_0000000000000000");
        assert_eq!(token(Offset(42)), "0000000000000000_0000000000000042");
        assert_eq!(token(Offset(GROUP_SCALE + 7)), "0000000000000001_0000000000000007");
        assert_eq!(parse("0000000000000000_0000000000000000"), Ok(Start::At(Offset(0))));
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
