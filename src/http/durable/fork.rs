//! Stream forks: a stream created with `Stream-Forked-From` starts with its
//! source's records up to the fork offset (and, with a binary
//! `Stream-Fork-Sub-Offset`, part of the record there), then has records
//! of its own.
//!
//! Nothing is copied. A fork's topic holds only its own records; its
//! [`ForkOf`] (in the metadata log with the rest of its
//! [`DurableMeta`]) says where the inherited part comes from, and a read
//! walks the [`Segment`]s of the chain: the source's (which may be a fork
//! itself), cut at the fork offset, then the fork's own topic. The metadata
//! state machine keeps every source a fork reads (deleting it only marks
//! it; see `View::delete_topic`), so the inherited records never go away
//! under a fork.

use super::offset::{self, Start};
use super::reply::DsError;
use super::DsState;
use crate::api::Consistency;
use crate::api::{ReadFrom, ReadRequest, ReadResult};
use crate::ids::Offset;
use crate::meta::durable::{DurableMeta, ForkOf};
use axum::http::{HeaderMap, StatusCode};
use std::time::Duration;

pub const FORKED_FROM: &str = "stream-forked-from";
pub const FORK_OFFSET: &str = "stream-fork-offset";
pub const FORK_SUB_OFFSET: &str = "stream-fork-sub-offset";

/// The part of the stream URL before the stream's path.
const PREFIX: &str = "/v1/stream/";

/// A create's fork headers, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForkRequest {
    /// The source's stream path.
    pub source: String,
    /// `Stream-Fork-Offset` (`None`: the source's tail).
    pub offset: Option<Start>,
    /// `Stream-Fork-Sub-Offset`: bytes of the record at the offset (or, in
    /// JSON mode, messages after it); 0 when absent.
    pub sub_offset: u64,
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, String> {
    match h.get(name) {
        None => Ok(None),
        Some(v) => v
            .to_str()
            .map(|s| Some(s.trim()))
            .map_err(|_| format!("{name} is not visible ASCII")),
    }
}

fn percent_decode_path(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let v = b
                .get(i + 1..i + 3)
                .and_then(|x| std::str::from_utf8(x).ok())
                .and_then(|x| u8::from_str_radix(x, 16).ok())
                .ok_or_else(|| format!("bad percent escape in {s:?}"))?;
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} is not UTF-8"))
}

/// The stream path named by `Stream-Forked-From`: a stream URL of this
/// server, absolute (`http://host/v1/stream/x`) or by path (`/v1/stream/x`).
pub fn source_path(value: &str) -> Result<String, String> {
    let path = match value.split_once("://") {
        Some((_, rest)) => rest.find('/').map_or("", |i| &rest[i..]),
        None => value,
    };
    let path = path.split(['?', '#']).next().unwrap_or("");
    match path.strip_prefix(PREFIX) {
        Some(p) if !p.is_empty() => percent_decode_path(p),
        _ => Err(format!(
            "Stream-Forked-From must be a stream URL ({PREFIX}...), got {value:?}"
        )),
    }
}

/// The fork headers of a create: none, or a checked [`ForkRequest`].
pub fn request(h: &HeaderMap) -> Result<Option<ForkRequest>, String> {
    let from = header(h, FORKED_FROM)?;
    let at = header(h, FORK_OFFSET)?;
    let sub = header(h, FORK_SUB_OFFSET)?;
    let Some(from) = from else {
        if at.is_some() || sub.is_some() {
            return Err("Stream-Fork-Offset and Stream-Fork-Sub-Offset need Stream-Forked-From".into());
        }
        return Ok(None);
    };
    let offset = at.map(offset::parse).transpose()?;
    let sub_offset = match sub {
        None => 0,
        Some(s) => {
            let plain = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'));
            if !plain {
                return Err(format!(
                    "Stream-Fork-Sub-Offset must be a non-negative integer, got {s:?}"
                ));
            }
            s.parse()
                .map_err(|_| format!("Stream-Fork-Sub-Offset {s:?} is too large"))?
        }
    };
    if sub_offset > 0 && offset.is_none() {
        return Err("Stream-Fork-Sub-Offset needs Stream-Fork-Offset".into());
    }
    Ok(Some(ForkRequest {
        source: source_path(from)?,
        offset,
        sub_offset,
    }))
}

/// Whether a repeated create asks for the fork that exists: `existing` (a
/// fork or not) against the request's source topic and fork headers.
pub fn same_fork(existing: Option<&ForkOf>, req: Option<(&str, &ForkRequest)>) -> bool {
    match (existing, req) {
        (None, None) => true,
        (Some(f), Some((source_topic, r))) => {
            let requested = match r.offset {
                None => None,
                Some(Start::At(o)) => Some(o),
                Some(Start::Beginning) => Some(Offset::ZERO),
                // `now` names no fixed offset: never the same request.
                Some(Start::Now) => return false,
            };
            f.source == source_topic && f.requested_offset == requested && f.sub_offset == r.sub_offset
        }
        _ => false,
    }
}

/// A run of a stream's offsets stored in one topic: stream offsets
/// `start..end` are the topic's offsets `start - shift..end - shift`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub topic: String,
    pub start: u64,
    /// `None`: open-ended (the stream's own topic).
    pub end: Option<u64>,
    pub shift: u64,
    /// Values are cut to this many bytes (an inherited part of a record).
    pub cut: Option<u64>,
}

impl Segment {
    fn contains(&self, o: u64) -> bool {
        o >= self.start && self.end.is_none_or(|e| o < e)
    }
}

/// The segments a stream's offsets are read from, oldest first: `topic`
/// alone for an ordinary stream; for a fork, its source's segments cut at
/// the fork offset (plus the partial record), then its own topic. `source`
/// gives a topic's protocol state.
pub fn chain(
    topic: &str,
    meta: &DurableMeta,
    source: &dyn Fn(&str) -> Option<DurableMeta>,
) -> Result<Vec<Segment>, String> {
    // The forks from `topic` back to the first stream of the chain.
    let mut links = vec![(topic.to_string(), meta.fork.as_deref().cloned())];
    while let Some(fork) = links.last().and_then(|(_, f)| f.clone()) {
        if links.len() > 10_000 {
            return Err(format!("the fork chain of {topic:?} does not end"));
        }
        let m =
            source(&fork.source).ok_or_else(|| format!("{:?}, a source of {topic:?}, is not a stream", fork.source))?;
        links.push((fork.source.clone(), m.fork.map(|f| *f)));
    }
    let mut segs: Vec<Segment> = Vec::new();
    for (t, fork) in links.into_iter().rev() {
        let Some(f) = fork else {
            segs.push(Segment {
                topic: t,
                start: 0,
                end: None,
                shift: 0,
                cut: None,
            });
            continue;
        };
        let at = f.offset.get();
        let partial = match f.partial {
            None => None,
            Some(n) => {
                let s = segs
                    .iter()
                    .find(|s| s.contains(at))
                    .ok_or_else(|| format!("{t:?} forks a record its source does not have"))?;
                Some(Segment {
                    topic: s.topic.clone(),
                    start: at,
                    end: Some(at + 1),
                    shift: s.shift,
                    cut: Some(s.cut.map_or(n, |c| c.min(n))),
                })
            }
        };
        segs.retain(|s| s.start < at);
        for s in &mut segs {
            s.end = Some(s.end.map_or(at, |e| e.min(at)));
        }
        segs.extend(partial);
        let base = f.base().get();
        segs.push(Segment {
            topic: t,
            start: base,
            end: None,
            shift: base,
            cut: None,
        });
    }
    Ok(segs)
}

/// Reads a stream through its segments, in stream offsets: up to `limit`
/// records and about `max_bytes`, continuing across segment ends; waits up
/// to `wait` (in the stream's own topic) only when nothing was read. An
/// offset below what retention kept is 410, past the end 400.
pub(crate) async fn read(
    st: &DsState,
    segs: &[Segment],
    from: ReadFrom,
    wait: Duration,
    limit: usize,
    max_bytes: usize,
    consistency: Consistency,
) -> Result<ReadResult, DsError> {
    let last = segs
        .len()
        .checked_sub(1)
        .ok_or_else(|| DsError::new(StatusCode::INTERNAL_SERVER_ERROR, "a stream without segments"))?;
    let (mut k, mut topic_from) = match from {
        ReadFrom::Start => (0, ReadFrom::Start),
        ReadFrom::End => (last, ReadFrom::End),
        ReadFrom::At(o) => {
            let k = segs.iter().position(|s| s.contains(o.get())).unwrap_or(last);
            // An offset below the own segment's start that no segment holds
            // is an offset this stream never had.
            let o = o
                .get()
                .checked_sub(segs[k].shift)
                .ok_or_else(|| DsError::bad(format!("offset {} is not in this stream", offset::token(o))))?;
            (k, ReadFrom::At(Offset(o)))
        }
    };
    let mut out = ReadResult {
        records: Vec::new(),
        next_offset: Offset::ZERO,
        high_watermark: Offset::ZERO,
        start_offset: Offset::ZERO,
    };
    let mut bytes = 0usize;
    loop {
        let seg = &segs[k];
        let own = k == last;
        let room = limit.saturating_sub(out.records.len()).max(1);
        let req = ReadRequest {
            from: topic_from,
            limit: room,
            max_bytes: max_bytes.saturating_sub(bytes).max(1),
            wait: if own && out.records.is_empty() {
                wait
            } else {
                Duration::ZERO
            },
            committed: true,
            consistency,
        };
        let r = match st.engine.records.read(&seg.topic, 0, req).await {
            Ok(r) => r,
            Err(e) => {
                let gone = matches!((topic_from, e.start_offset), (ReadFrom::At(o), Some(s)) if o < s);
                let mut err = DsError::from(e);
                if gone {
                    err.status = StatusCode::GONE;
                }
                return Err(err);
            }
        };
        if k == 0 {
            out.start_offset = Offset(r.start_offset.get() + seg.shift);
        }
        let mut next = r.next_offset.get() + seg.shift;
        for (o, mut rec) in r.records {
            let at = o.get() + seg.shift;
            if seg.end.is_some_and(|e| at >= e) {
                break;
            }
            if let (Some(n), Some(v)) = (seg.cut, rec.value.as_mut()) {
                *v = v.slice(..v.len().min(usize::try_from(n).unwrap_or(usize::MAX)));
            }
            bytes += rec.value.as_ref().map_or(0, |v| v.len());
            out.records.push((Offset(at), rec));
        }
        if let Some(e) = seg.end {
            next = next.min(e);
        }
        out.next_offset = Offset(next);
        if own {
            out.high_watermark = Offset(r.high_watermark.get() + seg.shift);
            return Ok(out);
        }
        let full = out.records.len() >= limit || bytes >= max_bytes;
        if seg.end.is_some_and(|e| next < e) || full {
            // Stopped inside the inherited part: there is more to read.
            out.high_watermark = Offset(next + 1);
            return Ok(out);
        }
        k += 1;
        topic_from = ReadFrom::At(Offset(segs[k].start - segs[k].shift));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::durable::headers::tests::map;
    use std::collections::BTreeMap;

    const ZERO: &str = "0000000000000000_0000000000000000";

    #[test]
    fn fork_headers_parse() {
        assert_eq!(request(&HeaderMap::new()), Ok(None));
        let r = request(&map(&[
            (FORKED_FROM, "/v1/stream/a%2Fb"),
            (FORK_OFFSET, ZERO),
            (FORK_SUB_OFFSET, "3"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(
            r,
            ForkRequest {
                source: "a/b".into(),
                offset: Some(Start::At(Offset(0))),
                sub_offset: 3
            }
        );
        let r = request(&map(&[(FORKED_FROM, "http://h:1/v1/stream/x/y")]))
            .unwrap()
            .unwrap();
        assert_eq!((r.source.as_str(), r.offset, r.sub_offset), ("x/y", None, 0));
        // Sub-offset 0 needs no offset.
        assert!(request(&map(&[(FORKED_FROM, "/v1/stream/x"), (FORK_SUB_OFFSET, "0")])).is_ok());
    }

    #[test]
    fn bad_fork_headers_are_refused() {
        let cases: &[&[(&'static str, &str)]] = &[
            &[(FORK_SUB_OFFSET, "0")],
            &[(FORK_OFFSET, ZERO)],
            &[(FORKED_FROM, "/v1/stream/x"), (FORK_SUB_OFFSET, "1")],
            &[
                (FORKED_FROM, "/v1/stream/x"),
                (FORK_OFFSET, "9999999999999999_9999999999999999"),
            ],
            &[(FORKED_FROM, "/v1/stream/x"), (FORK_OFFSET, "12")],
            &[(FORKED_FROM, "/v1/stream/")],
            &[(FORKED_FROM, "/elsewhere/x")],
            &[(FORKED_FROM, "/v1/stream/%zz")],
        ];
        for c in cases {
            assert!(request(&map(c)).is_err(), "{c:?}");
        }
        for bad in ["-1", "abc", "1.5", "05", "+1", ""] {
            let h = map(&[
                (FORKED_FROM, "/v1/stream/x"),
                (FORK_OFFSET, ZERO),
                (FORK_SUB_OFFSET, bad),
            ]);
            assert!(request(&h).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_re_create_matches_only_the_same_fork() {
        let req = ForkRequest {
            source: "s".into(),
            offset: None,
            sub_offset: 0,
        };
        let f = ForkOf {
            source: "ds.s".into(),
            offset: Offset(4),
            ..Default::default()
        };
        assert!(same_fork(None, None));
        assert!(same_fork(Some(&f), Some(("ds.s", &req))), "the tail, asked for again");
        assert!(!same_fork(Some(&f), None));
        assert!(!same_fork(None, Some(("ds.s", &req))));
        assert!(!same_fork(Some(&f), Some(("ds.t", &req))));
        let at = ForkRequest {
            offset: Some(Start::At(Offset(0))),
            sub_offset: 2,
            ..req.clone()
        };
        let g = ForkOf {
            requested_offset: Some(Offset(0)),
            sub_offset: 2,
            ..f.clone()
        };
        assert!(same_fork(Some(&g), Some(("ds.s", &at))));
        let other = ForkRequest { sub_offset: 3, ..at };
        assert!(!same_fork(Some(&g), Some(("ds.s", &other))));
    }

    fn meta(fork: Option<ForkOf>) -> DurableMeta {
        DurableMeta {
            fork: fork.map(Box::new),
            ..Default::default()
        }
    }

    fn seg(topic: &str, start: u64, end: Option<u64>, shift: u64, cut: Option<u64>) -> Segment {
        Segment {
            topic: topic.into(),
            start,
            end,
            shift,
            cut,
        }
    }

    #[test]
    fn an_ordinary_stream_is_one_segment() {
        let none = |_: &str| None;
        assert_eq!(
            chain("ds.a", &meta(None), &none).unwrap(),
            vec![seg("ds.a", 0, None, 0, None)]
        );
    }

    #[test]
    fn forks_cut_their_sources_and_continue_in_their_own_topic() {
        // l0 ← l1 at 5 ← l2 at 7 (l1's offsets 5 and 6 are its own).
        let mut metas = BTreeMap::new();
        metas.insert("l0".to_string(), meta(None));
        let f1 = ForkOf {
            source: "l0".into(),
            offset: Offset(5),
            ..Default::default()
        };
        metas.insert("l1".to_string(), meta(Some(f1)));
        let look = |t: &str| metas.get(t).cloned();
        let f2 = ForkOf {
            source: "l1".into(),
            offset: Offset(7),
            ..Default::default()
        };
        assert_eq!(
            chain("l2", &meta(Some(f2)), &look).unwrap(),
            vec![
                seg("l0", 0, Some(5), 0, None),
                seg("l1", 5, Some(7), 5, None),
                seg("l2", 7, None, 7, None)
            ]
        );
        // Forking l1 below its own records drops them; at 0 nothing is inherited.
        let f3 = ForkOf {
            source: "l1".into(),
            offset: Offset(3),
            ..Default::default()
        };
        assert_eq!(
            chain("l3", &meta(Some(f3)), &look).unwrap(),
            vec![seg("l0", 0, Some(3), 0, None), seg("l3", 3, None, 3, None)]
        );
        let f4 = ForkOf {
            source: "l0".into(),
            ..Default::default()
        };
        assert_eq!(
            chain("l4", &meta(Some(f4)), &look).unwrap(),
            vec![seg("l4", 0, None, 0, None)]
        );
    }

    #[test]
    fn a_partial_record_is_a_one_record_segment_and_cuts_compose() {
        // l0 "abcdef" at 0; l1 = l0 at 0, 4 bytes; l2 = l1 at 0, 2 bytes.
        let mut metas = BTreeMap::new();
        metas.insert("l0".to_string(), meta(None));
        let f1 = ForkOf {
            source: "l0".into(),
            partial: Some(4),
            ..Default::default()
        };
        metas.insert("l1".to_string(), meta(Some(f1.clone())));
        let look = |t: &str| metas.get(t).cloned();
        assert_eq!(
            chain("l1", &meta(Some(f1)), &look).unwrap(),
            vec![seg("l0", 0, Some(1), 0, Some(4)), seg("l1", 1, None, 1, None)]
        );
        let f2 = ForkOf {
            source: "l1".into(),
            partial: Some(9),
            ..Default::default()
        };
        assert_eq!(
            chain("l2", &meta(Some(f2)), &look).unwrap(),
            vec![seg("l0", 0, Some(1), 0, Some(4)), seg("l2", 1, None, 1, None)],
            "the tighter cut wins"
        );
        let f3 = ForkOf {
            source: "l1".into(),
            partial: Some(2),
            ..Default::default()
        };
        assert_eq!(chain("l3", &meta(Some(f3)), &look).unwrap()[0].cut, Some(2));
    }

    #[test]
    fn a_missing_source_is_an_error() {
        let f = ForkOf {
            source: "gone".into(),
            ..Default::default()
        };
        assert!(chain("x", &meta(Some(f)), &|_: &str| None).is_err());
    }
}
