//! The swap at the heart of log compaction: a run of a stream's indexed
//! chunks is replaced by chunks holding the same offset range, rewritten
//! with superseded records left out. The swap is one metadata command
//! ([`Command::CompactChunks`](super::Command::CompactChunks)), and this is
//! the rule `apply` holds it to, so that a compactor working from a stale
//! view, or racing a trim, another compaction or a flush, changes nothing:
//!
//! - `replaced` must still be, chunk for chunk, a contiguous run of the
//!   stream's chunks (the same objects, byte ranges, offsets and CRCs);
//! - `chunks` must tile exactly the range `replaced` covered, in order,
//!   each non-empty, so the index stays contiguous and no offset moves.
//!
//! Offsets inside the new chunks may have gaps (the removed records); the
//! range of each chunk is what the index and readers go by.

use super::IndexedChunk;

/// Replace the run `replaced` of `chunks` by `new`, or say why not (and
/// change nothing).
pub fn swap(chunks: &mut Vec<IndexedChunk>, replaced: &[IndexedChunk], new: &[IndexedChunk]) -> Result<(), String> {
    let (Some(first), Some(last)) = (replaced.first(), replaced.last()) else {
        return Err("a compaction must replace at least one chunk".into());
    };
    let at = chunks.iter().position(|c| c == first).ok_or_else(|| {
        format!(
            "chunk {}[{}..{}] is no longer indexed",
            first.key, first.base, first.end
        )
    })?;
    if chunks.get(at..at + replaced.len()) != Some(replaced) {
        return Err(format!(
            "chunks {}..{} are no longer indexed as the compactor read them",
            first.base, last.end
        ));
    }
    tiles(new, first.base, last.end)?;
    chunks.splice(at..at + replaced.len(), new.iter().cloned());
    Ok(())
}

/// Whether `new` covers `base..end` exactly: in order, no gap, no overlap,
/// no empty chunk, each byte range well formed.
fn tiles(new: &[IndexedChunk], base: crate::ids::Offset, end: crate::ids::Offset) -> Result<(), String> {
    let mut at = base;
    for c in new {
        if c.base != at || c.end <= c.base || c.byte_end < c.byte_start {
            return Err(format!(
                "compacted chunk {}[{}..{}] does not continue the range at {at}",
                c.key, c.base, c.end
            ));
        }
        at = c.end;
    }
    if at != end || new.is_empty() {
        return Err(format!(
            "the compacted chunks cover {base}..{at}, not the replaced {base}..{end}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Offset;

    fn chunk(key: &str, base: u64, end: u64) -> IndexedChunk {
        IndexedChunk {
            base: Offset(base),
            end: Offset(end),
            key: key.into(),
            byte_start: 0,
            byte_end: 100,
            max_timestamp: 1,
            crc: 7,
        }
    }

    fn index() -> Vec<IndexedChunk> {
        vec![
            chunk("a", 0, 10),
            chunk("b", 10, 20),
            chunk("c", 20, 30),
            chunk("d", 30, 40),
        ]
    }

    #[test]
    fn a_run_of_chunks_is_replaced_by_chunks_tiling_the_same_range() {
        let mut chunks = index();
        let new = [chunk("x", 10, 25), chunk("y", 25, 30)];
        let run = chunks[1..3].to_vec();
        swap(&mut chunks, &run, &new).unwrap();
        let keys: Vec<&str> = chunks.iter().map(|c| c.key.as_str()).collect();
        assert_eq!(keys, ["a", "x", "y", "d"]);
        // One chunk for the whole index.
        let mut chunks = index();
        swap(&mut chunks, &index(), &[chunk("z", 0, 40)]).unwrap();
        assert_eq!(chunks, [chunk("z", 0, 40)]);
    }

    #[test]
    fn a_stale_or_malformed_swap_changes_nothing() {
        let moved = IndexedChunk {
            crc: 8,
            ..chunk("b", 10, 20)
        };
        let cases: Vec<(Vec<IndexedChunk>, Vec<IndexedChunk>)> = vec![
            // Nothing replaced.
            (vec![], vec![chunk("x", 10, 20)]),
            // A chunk no longer indexed (compacted or trimmed meanwhile).
            (vec![chunk("gone", 10, 20)], vec![chunk("x", 10, 20)]),
            (vec![moved], vec![chunk("x", 10, 20)]),
            // Not a contiguous run.
            (vec![chunk("a", 0, 10), chunk("c", 20, 30)], vec![chunk("x", 0, 30)]),
            // Past the end of the index.
            (vec![chunk("d", 30, 40), chunk("e", 40, 50)], vec![chunk("x", 30, 50)]),
            // New chunks that do not tile the range.
            (vec![chunk("b", 10, 20)], vec![]),
            (vec![chunk("b", 10, 20)], vec![chunk("x", 10, 19)]),
            (vec![chunk("b", 10, 20)], vec![chunk("x", 11, 20)]),
            (vec![chunk("b", 10, 20)], vec![chunk("x", 10, 21)]),
            (vec![chunk("b", 10, 20)], vec![chunk("x", 10, 15), chunk("y", 16, 20)]),
            (vec![chunk("b", 10, 20)], vec![chunk("x", 10, 15), chunk("y", 12, 20)]),
            (vec![chunk("b", 10, 20)], vec![chunk("x", 10, 10), chunk("y", 10, 20)]),
        ];
        for (replaced, new) in cases {
            let mut chunks = index();
            assert!(swap(&mut chunks, &replaced, &new).is_err(), "{replaced:?} -> {new:?}");
            assert_eq!(chunks, index(), "changed by {replaced:?} -> {new:?}");
        }
    }
}
