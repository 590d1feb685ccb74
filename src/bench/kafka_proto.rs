//! The Kafka requests the bench sends and the responses it reads: the
//! client side of what `kafka::proto` serves, in the versions the bench
//! speaks (Metadata v8, Produce v8, Fetch v11, ListOffsets v1; all with the
//! non-flexible request header v1 and response header v0).
//!
//! Encoders return whole frames (the 4-byte size prefix included), so a
//! connection writes each request with one call. Decoders take the response
//! body after its correlation id and are bounded like the server's
//! ([`Reader`] checks every count against the bytes left). Responses decode
//! into the server's own response types where it has them, so the tests can
//! round-trip through the server's encoders.

use crate::kafka::proto::{
    Broker, FetchPartitionResponse, ListOffsetsPartitionResponse, MetadataPartition, MetadataTopic,
    ProducePartitionResponse, FETCH, LIST_OFFSETS, METADATA, PRODUCE,
};
use crate::kafka::wire::{DecodeResult, Reader, Writer};
use bytes::{BufMut, Bytes};

pub const METADATA_VERSION: i16 = 8;
pub const PRODUCE_VERSION: i16 = 8;
pub const FETCH_VERSION: i16 = 11;
pub const LIST_OFFSETS_VERSION: i16 = 1;

pub const CLIENT_ID: &str = "sluice-bench";

/// ListOffsets timestamp asking for the end of a partition.
pub const LATEST: i64 = -1;

/// A frame with its size prefix patched in by [`Frame::finish`].
struct Frame(Writer);

impl Frame {
    fn new(api_key: i16, version: i16, correlation_id: i32) -> Self {
        let mut w = Writer::default();
        w.i32(0); // size, patched in finish()
        w.i16(api_key);
        w.i16(version);
        w.i32(correlation_id);
        w.nullable_string(Some(CLIENT_ID));
        Frame(w)
    }

    fn finish(self) -> Bytes {
        let mut buf = self.0.buf;
        let size = i32::try_from(buf.len() - 4).unwrap_or(i32::MAX);
        buf[..4].copy_from_slice(&size.to_be_bytes());
        buf.freeze()
    }
}

/// Metadata v8 for `topics`, without auto-creation.
pub fn metadata_request(correlation_id: i32, topics: &[&str]) -> Bytes {
    let mut f = Frame::new(METADATA, METADATA_VERSION, correlation_id);
    let w = &mut f.0;
    w.array_len(topics.len());
    for t in topics {
        w.string(t);
    }
    w.bool(false); // allow_auto_topic_creation
    w.bool(false); // include_cluster_authorized_operations
    w.bool(false); // include_topic_authorized_operations
    f.finish()
}

/// Produce v8 of one record batch to one partition.
pub fn produce_request(
    correlation_id: i32,
    acks: i16,
    timeout_ms: i32,
    topic: &str,
    partition: i32,
    batch: &[u8],
) -> Bytes {
    let mut f = Frame::new(PRODUCE, PRODUCE_VERSION, correlation_id);
    let w = &mut f.0;
    w.buf.reserve(batch.len() + 64);
    w.nullable_string(None); // transactional_id
    w.i16(acks);
    w.i32(timeout_ms);
    w.array_len(1);
    w.string(topic);
    w.array_len(1);
    w.i32(partition);
    w.i32(i32::try_from(batch.len()).unwrap_or(i32::MAX));
    w.buf.put_slice(batch);
    f.finish()
}

/// One partition of a Fetch request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchAt {
    pub partition: i32,
    pub offset: i64,
    pub max_bytes: i32,
}

/// Fetch v11 (no session, no leader-epoch check, read-uncommitted).
pub fn fetch_request(
    correlation_id: i32,
    max_wait_ms: i32,
    min_bytes: i32,
    max_bytes: i32,
    topic: &str,
    partitions: &[FetchAt],
) -> Bytes {
    let mut f = Frame::new(FETCH, FETCH_VERSION, correlation_id);
    let w = &mut f.0;
    w.i32(-1); // replica_id: a consumer
    w.i32(max_wait_ms);
    w.i32(min_bytes);
    w.i32(max_bytes);
    w.i8(0); // isolation_level: read uncommitted
    w.i32(0); // session_id: none
    w.i32(-1); // session_epoch: no session
    w.array_len(1);
    w.string(topic);
    w.array_len(partitions.len());
    for p in partitions {
        w.i32(p.partition);
        w.i32(-1); // current_leader_epoch: unchecked
        w.i64(p.offset);
        w.i64(-1); // log_start_offset: only followers send it
        w.i32(p.max_bytes);
    }
    w.array_len(0); // forgotten_topics_data
    w.string(""); // rack_id
    f.finish()
}

/// ListOffsets v1: each partition's offset at `timestamp` ([`LATEST`] = its end).
pub fn list_offsets_request(correlation_id: i32, topic: &str, partitions: &[i32], timestamp: i64) -> Bytes {
    let mut f = Frame::new(LIST_OFFSETS, LIST_OFFSETS_VERSION, correlation_id);
    let w = &mut f.0;
    w.i32(-1); // replica_id
    w.array_len(1);
    w.string(topic);
    w.array_len(partitions.len());
    for p in partitions {
        w.i32(*p);
        w.i64(timestamp);
    }
    f.finish()
}

// ------------------------------------------------------------ responses

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetadataResponse {
    pub brokers: Vec<Broker>,
    pub controller: i32,
    pub cluster_id: Option<String>,
    pub topics: Vec<MetadataTopic>,
}

impl MetadataResponse {
    /// `host:port` of a broker (IPv6 hosts in brackets).
    pub fn address(&self, node_id: i32) -> Option<String> {
        let b = self.brokers.iter().find(|b| b.node_id == node_id)?;
        Some(if b.host.contains(':') {
            format!("[{}]:{}", b.host, b.port)
        } else {
            format!("{}:{}", b.host, b.port)
        })
    }
}

fn i32_array(r: &mut Reader) -> DecodeResult<Vec<i32>> {
    let n = r.array_len(4)?;
    (0..n).map(|_| r.i32()).collect()
}

pub fn decode_metadata_response(r: &mut Reader) -> DecodeResult<MetadataResponse> {
    let _throttle_ms = r.i32()?;
    let n = r.array_len(4 + 2 + 4 + 2)?;
    let mut brokers = Vec::with_capacity(n);
    for _ in 0..n {
        let node_id = r.i32()?;
        let host = r.string()?;
        let port = r.i32()?;
        let _rack = r.nullable_string()?;
        brokers.push(Broker { node_id, host, port });
    }
    let cluster_id = r.nullable_string()?;
    let controller = r.i32()?;
    let n = r.array_len(2 + 2 + 1 + 4 + 4)?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        let error_code = r.i16()?;
        let name = r.string()?;
        let _is_internal = r.bool()?;
        let m = r.array_len(2 + 4 + 4 + 4 + 3 * 4)?;
        let mut partitions = Vec::with_capacity(m);
        for _ in 0..m {
            let error_code = r.i16()?;
            let partition = r.i32()?;
            let leader = r.i32()?;
            let leader_epoch = r.i32()?;
            let _replicas = i32_array(r)?;
            let _isr = i32_array(r)?;
            let _offline = i32_array(r)?;
            partitions.push(MetadataPartition {
                error_code,
                partition,
                leader,
                leader_epoch,
            });
        }
        let _topic_authorized_operations = r.i32()?;
        topics.push(MetadataTopic {
            error_code,
            name,
            topic_id: crate::ids::TopicUuid::ZERO,
            partitions,
            authorized_operations: i32::MIN,
        });
    }
    let _cluster_authorized_operations = r.i32()?;
    r.expect_end()?;
    Ok(MetadataResponse {
        brokers,
        controller,
        cluster_id,
        topics,
    })
}

pub type PerTopic<T> = Vec<(String, Vec<T>)>;

pub fn decode_produce_response(r: &mut Reader) -> DecodeResult<PerTopic<ProducePartitionResponse>> {
    let n = r.array_len(2 + 4)?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.string()?;
        let m = r.array_len(4 + 2 + 8 + 8 + 8 + 4 + 2)?;
        let mut parts = Vec::with_capacity(m);
        for _ in 0..m {
            let partition = r.i32()?;
            let error_code = r.i16()?;
            let base_offset = r.i64()?;
            let _log_append_time_ms = r.i64()?;
            let log_start_offset = r.i64()?;
            let errors = r.array_len(4 + 2)?;
            for _ in 0..errors {
                let _batch_index = r.i32()?;
                let _message = r.nullable_string()?;
            }
            let error_message = r.nullable_string()?;
            parts.push(ProducePartitionResponse {
                partition,
                error_code,
                base_offset,
                log_start_offset,
                error_message,
            });
        }
        topics.push((name, parts));
    }
    let _throttle_ms = r.i32()?;
    r.expect_end()?;
    Ok(topics)
}

#[derive(Debug, Clone)]
pub struct FetchResponse {
    pub error_code: i16,
    /// Each partition's record batches arrive as one `Bytes` in `batches`
    /// (empty when there are none).
    pub topics: PerTopic<FetchPartitionResponse>,
}

pub fn decode_fetch_response(r: &mut Reader) -> DecodeResult<FetchResponse> {
    let _throttle_ms = r.i32()?;
    let error_code = r.i16()?;
    let _session_id = r.i32()?;
    let n = r.array_len(2 + 4)?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.string()?;
        let m = r.array_len(4 + 2 + 8 + 8 + 8 + 4 + 4 + 4)?;
        let mut parts = Vec::with_capacity(m);
        for _ in 0..m {
            let partition = r.i32()?;
            let error_code = r.i16()?;
            let high_watermark = r.i64()?;
            let _last_stable_offset = r.i64()?;
            let log_start_offset = r.i64()?;
            if let Some(aborted) = r.nullable_array_len(8 + 8)? {
                for _ in 0..aborted {
                    let _producer_id = r.i64()?;
                    let _first_offset = r.i64()?;
                }
            }
            let _preferred_read_replica = r.i32()?;
            let batches = r.nullable_bytes()?.filter(|b| !b.is_empty()).into_iter().collect();
            parts.push(FetchPartitionResponse {
                partition,
                error_code,
                high_watermark,
                last_stable_offset: high_watermark,
                aborted: Vec::new(),
                log_start_offset,
                batches,
            });
        }
        topics.push((name, parts));
    }
    r.expect_end()?;
    Ok(FetchResponse { error_code, topics })
}

pub fn decode_list_offsets_response(r: &mut Reader) -> DecodeResult<PerTopic<ListOffsetsPartitionResponse>> {
    let n = r.array_len(2 + 4)?;
    let mut topics = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.string()?;
        let m = r.array_len(4 + 2 + 8 + 8)?;
        let mut parts = Vec::with_capacity(m);
        for _ in 0..m {
            parts.push(ListOffsetsPartitionResponse {
                partition: r.i32()?,
                error_code: r.i16()?,
                timestamp: r.i64()?,
                offset: r.i64()?,
                leader_epoch: -1,
            });
        }
        topics.push((name, parts));
    }
    r.expect_end()?;
    Ok(topics)
}

/// A readable name for the Kafka error codes a bench is likely to see.
pub fn error_name(code: i16) -> String {
    use crate::kafka::code::*;
    match code {
        OFFSET_OUT_OF_RANGE => "OFFSET_OUT_OF_RANGE".into(),
        CORRUPT_MESSAGE => "CORRUPT_MESSAGE".into(),
        UNKNOWN_TOPIC_OR_PARTITION => "UNKNOWN_TOPIC_OR_PARTITION".into(),
        LEADER_NOT_AVAILABLE => "LEADER_NOT_AVAILABLE".into(),
        NOT_LEADER_OR_FOLLOWER => "NOT_LEADER_OR_FOLLOWER".into(),
        MESSAGE_TOO_LARGE => "MESSAGE_TOO_LARGE".into(),
        INVALID_REQUIRED_ACKS => "INVALID_REQUIRED_ACKS".into(),
        UNSUPPORTED_VERSION => "UNSUPPORTED_VERSION".into(),
        INVALID_REQUEST => "INVALID_REQUEST".into(),
        INVALID_RECORD => "INVALID_RECORD".into(),
        THROTTLING_QUOTA_EXCEEDED => "THROTTLING_QUOTA_EXCEEDED".into(),
        UNKNOWN_SERVER_ERROR => "UNKNOWN_SERVER_ERROR".into(),
        other => format!("kafka error {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{batches, encode_batch, Record};
    use crate::ids::Offset;
    use crate::kafka::header::{decode_header, Header};
    use crate::kafka::proto::{
        decode_fetch, decode_list_offsets, decode_metadata, decode_produce, encode_fetch, encode_list_offsets,
        encode_metadata, encode_produce, FetchHead, MetadataCluster, MetadataTopicRef,
    };

    /// The frame's body (after the size prefix), checking the prefix.
    fn body(frame: &Bytes) -> Bytes {
        let size = i32::from_be_bytes(frame[..4].try_into().unwrap());
        assert_eq!(size as usize, frame.len() - 4, "size prefix");
        frame.slice(4..)
    }

    /// Decodes a request's header with the server's decoder.
    fn server_header(frame: &Bytes) -> (Header, Reader) {
        let mut r = Reader::new(body(frame));
        let h = decode_header(&mut r).unwrap();
        (h, r)
    }

    /// A response body as the server writes it, without the correlation id.
    fn response(encode: impl FnOnce(&mut Writer)) -> Reader {
        let mut w = Writer::default();
        encode(&mut w);
        Reader::new(w.buf.freeze())
    }

    fn batch_of(n: usize) -> Bytes {
        let records: Vec<Record> = (0..n)
            .map(|i| Record {
                timestamp_ms: 1_700_000_000_000 + i as i64,
                key: None,
                value: Some(Bytes::from(format!("value-{i}"))),
                headers: Vec::new(),
            })
            .collect();
        encode_batch(Offset(0), &records)
    }

    #[test]
    fn produce_requests_decode_with_the_servers_decoder() {
        let batch = batch_of(3);
        for acks in [-1, 0, 1] {
            let frame = produce_request(41, acks, 30_000, "bench", 2, &batch);
            let (h, mut r) = server_header(&frame);
            assert_eq!(
                h,
                Header {
                    api_key: PRODUCE,
                    api_version: PRODUCE_VERSION,
                    correlation_id: 41,
                    client_id: Some(CLIENT_ID.into()),
                }
            );
            let req = decode_produce(&mut r, PRODUCE_VERSION).unwrap();
            assert_eq!((req.acks, req.timeout_ms, req.transactional_id), (acks, 30_000, None));
            assert_eq!(req.topics, vec![("bench".to_string(), vec![(2, Some(batch.clone()))])]);
        }
    }

    #[test]
    fn metadata_requests_decode_with_the_servers_decoder() {
        let frame = metadata_request(7, &["a", "b"]);
        let (h, mut r) = server_header(&frame);
        assert_eq!((h.api_key, h.api_version, h.correlation_id), (METADATA, 8, 7));
        let req = decode_metadata(&mut r, METADATA_VERSION).unwrap();
        assert_eq!(
            req.topics,
            Some(vec![
                MetadataTopicRef::Name("a".into()),
                MetadataTopicRef::Name("b".into())
            ])
        );
        assert!(!req.allow_auto_topic_creation);
    }

    #[test]
    fn fetch_requests_decode_with_the_servers_decoder() {
        let parts = [
            FetchAt {
                partition: 0,
                offset: 10,
                max_bytes: 1 << 20,
            },
            FetchAt {
                partition: 3,
                offset: 0,
                max_bytes: 4096,
            },
        ];
        let frame = fetch_request(9, 500, 1, 8 << 20, "bench", &parts);
        let (h, mut r) = server_header(&frame);
        assert_eq!((h.api_key, h.api_version, h.correlation_id), (FETCH, 11, 9));
        let req = decode_fetch(&mut r, FETCH_VERSION).unwrap();
        assert_eq!(
            (req.max_wait_ms, req.min_bytes, req.max_bytes, req.isolation_level),
            (500, 1, 8 << 20, 0)
        );
        let (topic, got) = &req.topics[0];
        assert_eq!(topic, "bench");
        let got: Vec<(i32, i32, i64, i32)> = got
            .iter()
            .map(|p| {
                (
                    p.partition,
                    p.current_leader_epoch,
                    p.fetch_offset,
                    p.partition_max_bytes,
                )
            })
            .collect();
        assert_eq!(got, vec![(0, -1, 10, 1 << 20), (3, -1, 0, 4096)]);
    }

    #[test]
    fn list_offsets_requests_decode_with_the_servers_decoder() {
        let frame = list_offsets_request(3, "bench", &[0, 1], LATEST);
        let (h, mut r) = server_header(&frame);
        assert_eq!((h.api_key, h.api_version), (LIST_OFFSETS, 1));
        let req = decode_list_offsets(&mut r, LIST_OFFSETS_VERSION).unwrap();
        assert_eq!(
            req.topics,
            vec![("bench".to_string(), vec![(0, -1, LATEST), (1, -1, LATEST)])]
        );
    }

    #[test]
    fn metadata_responses_round_trip_through_the_servers_encoder() {
        let brokers = vec![
            Broker {
                node_id: 1,
                host: "127.0.0.1".into(),
                port: 9092,
            },
            Broker {
                node_id: 2,
                host: "::1".into(),
                port: 9093,
            },
        ];
        let topics = vec![
            MetadataTopic {
                error_code: 0,
                name: "bench".into(),
                topic_id: crate::ids::TopicUuid::ZERO,
                authorized_operations: i32::MIN,
                partitions: vec![
                    MetadataPartition {
                        error_code: 0,
                        partition: 0,
                        leader: 1,
                        leader_epoch: 4,
                    },
                    MetadataPartition {
                        error_code: 5,
                        partition: 1,
                        leader: -1,
                        leader_epoch: 0,
                    },
                ],
            },
            MetadataTopic {
                error_code: 3,
                name: "missing".into(),
                topic_id: crate::ids::TopicUuid::ZERO,
                authorized_operations: i32::MIN,
                partitions: vec![],
            },
        ];
        let cluster = MetadataCluster {
            brokers: &brokers,
            controller: 2,
            cluster_id: "cluster",
            authorized_operations: i32::MIN,
        };
        let mut r = response(|w| encode_metadata(w, METADATA_VERSION, &cluster, &topics).unwrap());
        let got = decode_metadata_response(&mut r).unwrap();
        assert_eq!(
            got,
            MetadataResponse {
                brokers,
                controller: 2,
                cluster_id: Some("cluster".into()),
                topics
            }
        );
        assert_eq!(got.address(1).as_deref(), Some("127.0.0.1:9092"));
        assert_eq!(got.address(2).as_deref(), Some("[::1]:9093"));
        assert_eq!(got.address(3), None);
    }

    #[test]
    fn produce_responses_round_trip_through_the_servers_encoder() {
        let topics = vec![(
            "bench".to_string(),
            vec![
                ProducePartitionResponse {
                    partition: 0,
                    error_code: 0,
                    base_offset: 1234,
                    log_start_offset: 0,
                    error_message: None,
                },
                ProducePartitionResponse {
                    partition: 1,
                    error_code: 6,
                    base_offset: -1,
                    log_start_offset: -1,
                    error_message: Some("not the leader".into()),
                },
            ],
        )];
        let mut r = response(|w| encode_produce(w, PRODUCE_VERSION, &topics, &[]));
        assert_eq!(decode_produce_response(&mut r).unwrap(), topics);
    }

    #[test]
    fn fetch_responses_round_trip_through_the_servers_encoder() {
        let (a, b) = (batch_of(2), batch_of(5));
        let topics = vec![(
            "bench".to_string(),
            vec![
                FetchPartitionResponse {
                    partition: 0,
                    error_code: 0,
                    high_watermark: 7,
                    last_stable_offset: 7,
                    aborted: Vec::new(),
                    log_start_offset: 0,
                    batches: vec![a.clone(), b.clone()],
                },
                FetchPartitionResponse {
                    partition: 1,
                    error_code: 1,
                    high_watermark: -1,
                    last_stable_offset: -1,
                    aborted: Vec::new(),
                    log_start_offset: -1,
                    batches: vec![],
                },
            ],
        )];
        let mut r = response(|w| encode_fetch(w, FETCH_VERSION, FetchHead::default(), &topics, &[]));
        let got = decode_fetch_response(&mut r).unwrap();
        assert_eq!(got.error_code, 0);
        let (name, parts) = &got.topics[0];
        assert_eq!(name, "bench");
        assert_eq!(
            (parts[0].partition, parts[0].error_code, parts[0].high_watermark),
            (0, 0, 7)
        );
        let mut joined = a.to_vec();
        joined.extend_from_slice(&b);
        assert_eq!(parts[0].batches, vec![Bytes::from(joined)]);
        let counts: Vec<u32> = batches("fetch", &parts[0].batches[0])
            .map(|b| b.unwrap().0.record_count)
            .collect();
        assert_eq!(counts, vec![2, 5]);
        assert_eq!((parts[1].error_code, parts[1].batches.len()), (1, 0));
    }

    #[test]
    fn list_offsets_responses_round_trip_through_the_servers_encoder() {
        let topics = vec![(
            "bench".to_string(),
            vec![ListOffsetsPartitionResponse {
                partition: 0,
                error_code: 0,
                timestamp: -1,
                offset: 99,
                leader_epoch: -1,
            }],
        )];
        let mut r = response(|w| encode_list_offsets(w, LIST_OFFSETS_VERSION, &topics).unwrap());
        assert_eq!(decode_list_offsets_response(&mut r).unwrap(), topics);
    }

    #[test]
    fn truncated_responses_are_errors_not_panics() {
        let topics = vec![(
            "bench".to_string(),
            vec![ProducePartitionResponse {
                partition: 0,
                error_code: 0,
                base_offset: 1,
                log_start_offset: 0,
                error_message: None,
            }],
        )];
        let mut w = Writer::default();
        encode_produce(&mut w, PRODUCE_VERSION, &topics, &[]);
        let full = w.buf.freeze();
        for cut in 0..full.len() {
            assert!(
                decode_produce_response(&mut Reader::new(full.slice(..cut))).is_err(),
                "cut at {cut}"
            );
        }
        let mut w = Writer::default();
        encode_fetch(&mut w, FETCH_VERSION, FetchHead::default(), &[], &[]);
        let full = w.buf.freeze();
        for cut in 0..full.len() {
            assert!(
                decode_fetch_response(&mut Reader::new(full.slice(..cut))).is_err(),
                "cut at {cut}"
            );
        }
    }
}
