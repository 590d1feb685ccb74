//! DescribeLogDirs (v1–v4; v2+ flexible): one logical log dir per node,
//! `sluice://<node id>`, holding the partitions whose streams this node has
//! open, each with its size in bytes ([`Topics::partition_bytes`]). As a
//! Kafka broker reports only its own replicas, a node reports only the
//! partitions it owns; a tool asking every broker sees each partition
//! once. There is no local disk to measure: total and usable bytes are -1
//! (unknown), offset lag is 0 (there are no follower replicas) and nothing
//! is a future replica.
//!
//! [`Topics::partition_bytes`]: crate::api::Topics::partition_bytes

use super::proto::Fields;
use super::wire::{DecodeResult, Reader, Writer};
use crate::api::Services;
use kafka_protocol::messages as km;
use kafka_protocol::protocol::StrBytes;

pub const DESCRIBE_LOG_DIRS: i16 = 35;

/// `None`: every topic; else each topic with the partitions asked about.
pub type LogDirsRequest = Option<Vec<(String, Vec<i32>)>>;

pub fn decode_describe_log_dirs(r: &mut Reader, version: i16) -> DecodeResult<LogDirsRequest> {
    let mut f = Fields {
        r,
        flexible: version >= 2,
    };
    let out = match f.nullable_array_of(2 + 4, 1 + 1 + 1)? {
        None => None,
        Some(n) => {
            let mut topics = Vec::with_capacity(n);
            for _ in 0..n {
                let name = f.string()?;
                let m = f.array_of(4, 4)?;
                let mut partitions = Vec::with_capacity(m);
                for _ in 0..m {
                    partitions.push(f.r.i32()?);
                }
                f.tags()?;
                topics.push((name, partitions));
            }
            Some(topics)
        }
    };
    f.tags()?;
    f.r.expect_end()?;
    Ok(out)
}

/// One topic of the answer: (name, [(partition, bytes)]).
pub type DirTopic = (String, Vec<(i32, u64)>);

pub fn encode_describe_log_dirs(w: &mut Writer, version: i16, dir: &str, topics: &[DirTopic]) -> DecodeResult<()> {
    use km::describe_log_dirs_response as d;
    let result = d::DescribeLogDirsResult::default()
        .with_log_dir(StrBytes::from_string(dir.to_string()))
        .with_topics(
            topics
                .iter()
                .map(|(name, partitions)| {
                    d::DescribeLogDirsTopic::default()
                        .with_name(StrBytes::from_string(name.clone()).into())
                        .with_partitions(
                            partitions
                                .iter()
                                .map(|&(p, bytes)| {
                                    d::DescribeLogDirsPartition::default()
                                        .with_partition_index(p)
                                        .with_partition_size(i64::try_from(bytes).unwrap_or(i64::MAX))
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
        .with_total_bytes(-1)
        .with_usable_bytes(-1);
    let resp = km::DescribeLogDirsResponse::default().with_results(vec![result]);
    w.message(&resp, version)
}

/// The log dir this node reports.
pub fn dir_name(node: &str) -> String {
    format!("sluice://{node}")
}

/// The partitions of the asked topics that this node owns, with their
/// sizes. Unknown topics and partitions (and topics the caller may not
/// see) are left out, as Kafka leaves out what it has no replica of.
pub fn describe_log_dirs(engine: &Services, node: &str, req: LogDirsRequest) -> Vec<DirTopic> {
    let asked: Vec<(String, Option<Vec<i32>>)> = match req {
        Some(topics) => topics.into_iter().map(|(t, p)| (t, Some(p))).collect(),
        None => engine
            .topics
            .list_topics()
            .into_iter()
            .map(|t| (t.name, None))
            .collect(),
    };
    let mut out = Vec::new();
    for (name, partitions) in asked {
        let (Ok(desc), Ok(bytes)) = (
            engine.topics.describe_topic(&name),
            engine.topics.partition_bytes(&name),
        ) else {
            continue;
        };
        let mine: Vec<(i32, u64)> = desc
            .partition_info
            .iter()
            .filter(|p| p.owner.as_deref() == Some(node) && p.state == "open")
            .map(|p| p.partition as i32)
            .filter(|p| partitions.as_ref().is_none_or(|asked| asked.contains(p)))
            .map(|p| (p, bytes.get(p as usize).copied().unwrap_or(0)))
            .collect();
        if !mine.is_empty() {
            out.push((name, mine));
        }
    }
    out
}

pub(super) fn request(engine: &Services, version: i16, r: &mut Reader, w: &mut Writer) -> DecodeResult<()> {
    let req = decode_describe_log_dirs(r, version)?;
    let node = engine.cluster.ready().node_id;
    let topics = describe_log_dirs(engine, &node, req);
    encode_describe_log_dirs(w, version, &dir_name(&node), &topics)
}
