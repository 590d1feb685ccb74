//! Load over the Kafka protocol with a small native client (the wire
//! formats are in `kafka_proto`).
//!
//! Producers: Metadata on the bootstrap connection names each partition's
//! leader (at its advertised address); every producer opens one connection
//! per partition to that leader (a *lane*). A lane's writer builds a
//! RecordBatch v2 per request and pipelines up to `--max-in-flight`
//! Produce requests, as librdkafka does; its reader matches the answers,
//! which come back in order, to the requests and records their latency.
//!
//! Consumers: one connection per partition to its leader; `consume` reads
//! from the start to the end (as of the start of the run), `tail` (for e2e)
//! long-polls from the end.

use super::kafka_proto::{self as kp, FetchAt};
use super::stats::Recorder;
use super::{created_at, record_value, wait_due, BenchArgs, KeyCycle};
use crate::batch::{batches, decode_records, encode_batch, Record};
use crate::ids::Offset;
use crate::kafka::proto::FetchPartitionResponse;
use crate::kafka::wire::Reader;
use bytes::Bytes;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// The Produce timeout the bench asks for.
const PRODUCE_TIMEOUT_MS: i32 = 30_000;
/// How long a lane waits for its last answers after the load ends.
const DRAIN: Duration = Duration::from_secs(30);
/// Largest response frame accepted.
const MAX_RESPONSE_BYTES: usize = 256 << 20;
/// Fetch sizes: per partition and per request.
const FETCH_PARTITION_BYTES: i32 = 8 << 20;
const FETCH_MAX_BYTES: i32 = 32 << 20;
/// A tail consumer's long poll.
const TAIL_WAIT_MS: i32 = 200;

/// Why a request failed, as counted in the report.
type Kind = String;

/// A connection: a buffered reader and the write half.
struct Conn {
    rd: BufReader<OwnedReadHalf>,
    wr: OwnedWriteHalf,
    next_id: i32,
}

impl Conn {
    async fn connect(addr: &str) -> std::io::Result<Conn> {
        let s = TcpStream::connect(addr).await?;
        s.set_nodelay(true)?;
        let (rd, wr) = s.into_split();
        Ok(Conn {
            rd: BufReader::with_capacity(256 << 10, rd),
            wr,
            next_id: 0,
        })
    }

    fn next_id(&mut self) -> i32 {
        self.next_id = self.next_id.wrapping_add(1);
        self.next_id
    }

    /// Sends one request and reads its answer.
    async fn call(&mut self, build: impl FnOnce(i32) -> Bytes) -> Result<Reader, Kind> {
        let id = self.next_id();
        self.wr.write_all(&build(id)).await.map_err(|_| "io".to_string())?;
        read_response(&mut self.rd, id).await
    }
}

/// Reads one response frame and checks its correlation id; the reader is
/// left at the response body.
async fn read_response(rd: &mut BufReader<OwnedReadHalf>, correlation_id: i32) -> Result<Reader, Kind> {
    let mut len = [0u8; 4];
    rd.read_exact(&mut len).await.map_err(|_| "io".to_string())?;
    let len = usize::try_from(i32::from_be_bytes(len)).unwrap_or(usize::MAX);
    if !(4..=MAX_RESPONSE_BYTES).contains(&len) {
        return Err("bad frame".into());
    }
    let mut buf = vec![0u8; len];
    rd.read_exact(&mut buf).await.map_err(|_| "io".to_string())?;
    let mut r = Reader::new(Bytes::from(buf));
    let got = r.i32().map_err(|_| "bad frame".to_string())?;
    if got != correlation_id {
        return Err("correlation id".into());
    }
    Ok(r)
}

fn malformed<E>(_: E) -> Kind {
    "malformed response".into()
}

/// Each partition of `topic` with its leader's address, from Metadata on
/// the bootstrap connection (retried while leaders are being elected).
async fn leaders(bootstrap: &str, topic: &str) -> anyhow::Result<Vec<(i32, String)>> {
    let mut conn = Conn::connect(bootstrap)
        .await
        .map_err(|e| anyhow::anyhow!("connecting to the Kafka listener {bootstrap}: {e}"))?;
    let mut last = String::new();
    for _ in 0..100 {
        let mut r = conn
            .call(|id| kp::metadata_request(id, &[topic]))
            .await
            .map_err(|e| anyhow::anyhow!("Metadata from {bootstrap}: {e}"))?;
        let md = kp::decode_metadata_response(&mut r).map_err(|e| anyhow::anyhow!("Metadata from {bootstrap}: {e}"))?;
        match md.topics.iter().find(|t| t.name == topic) {
            Some(t) if t.error_code == 0 && !t.partitions.is_empty() => {
                let found: Option<Vec<(i32, String)>> = t
                    .partitions
                    .iter()
                    .map(|p| {
                        (p.error_code == 0)
                            .then(|| md.address(p.leader))
                            .flatten()
                            .map(|a| (p.partition, a))
                    })
                    .collect();
                if let Some(mut found) = found {
                    found.sort();
                    return Ok(found);
                }
                last = "a partition has no leader".into();
            }
            Some(t) => last = kp::error_name(t.error_code),
            None => last = "topic missing from the answer".into(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("no leaders for {topic} from {bootstrap} after 10 s: {last}")
}

/// Records created at one instant: (when, how many).
type Created = Vec<(Instant, u32)>;

/// A Produce request awaiting its answer.
struct InFlight {
    id: i32,
    created: Created,
    records: u64,
    bytes: u64,
    _permit: OwnedSemaphorePermit,
}

/// What every lane of a run shares.
#[derive(Clone)]
struct LaneSpec {
    topic: Arc<str>,
    acks: i16,
    batch: usize,
    record_bytes: usize,
    linger: Duration,
    max_in_flight: usize,
    /// Gap between records of one lane (`None`: unlimited).
    interval: Option<Duration>,
    stamp: bool,
    deadline: Instant,
    /// Distinct keys (0: records have no key).
    keys: u64,
}

pub(super) async fn produce(
    args: &BenchArgs,
    rec: Arc<Recorder>,
    stamp: bool,
    deadline: Instant,
) -> anyhow::Result<()> {
    let leaders = leaders(&args.bootstrap, &args.topic).await?;
    let lanes = args.producers * leaders.len();
    let spec = LaneSpec {
        topic: args.topic.as_str().into(),
        acks: args.acks,
        batch: args.batch,
        record_bytes: args.record_bytes,
        linger: Duration::from_millis(args.linger_ms),
        max_in_flight: args.max_in_flight,
        interval: (args.rate > 0).then(|| Duration::from_secs_f64(lanes as f64 / args.rate as f64)),
        stamp,
        deadline,
        keys: args.keys,
    };
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(lanes);
    for i in 0..lanes {
        let (partition, addr) = leaders[i % leaders.len()].clone();
        // Spread the lanes' schedules over one interval.
        let first_due = start
            + spec
                .interval
                .map_or(Duration::ZERO, |iv| iv.mul_f64(i as f64 / lanes as f64));
        let keys = KeyCycle::new(spec.keys, i, lanes);
        tasks.push(tokio::spawn(lane(
            spec.clone(),
            partition,
            addr,
            first_due,
            keys,
            rec.clone(),
        )));
    }
    for t in tasks {
        t.await?;
    }
    Ok(())
}

/// One producer's connection to one partition's leader.
async fn lane(
    spec: LaneSpec,
    partition: i32,
    addr: String,
    first_due: Instant,
    mut keys: Option<KeyCycle>,
    rec: Arc<Recorder>,
) {
    let conn = match Conn::connect(&addr).await {
        Ok(c) => c,
        Err(_) => return rec.error("connect"),
    };
    let Conn { rd, mut wr, .. } = conn;
    let (tx, rx) = mpsc::unbounded_channel::<InFlight>();
    let reader = (spec.acks != 0).then(|| tokio::spawn(read_acks(rd, rx, rec.clone())));
    let permits = Arc::new(Semaphore::new(spec.max_in_flight));
    let fixed = Bytes::from(record_value(spec.record_bytes, None));
    let mut next_due = first_due;
    let mut id = 0i32;
    loop {
        let mut created: Created = Vec::new();
        let permit = match spec.interval {
            None => {
                let permit = tokio::select! {
                    p = permits.clone().acquire_owned() => p.expect("the semaphore is never closed"),
                    _ = tokio::time::sleep_until(spec.deadline.into()) => break,
                };
                let now = Instant::now();
                if now >= spec.deadline {
                    break;
                }
                created.push((now, spec.batch as u32));
                permit
            }
            Some(iv) => {
                if next_due >= spec.deadline {
                    break;
                }
                let first = wait_due(next_due).await;
                next_due += iv;
                created.push((first, 1));
                // More records join while they are due within the linger.
                let flush_at = first + spec.linger;
                while created.len() < spec.batch && next_due < spec.deadline {
                    if next_due <= Instant::now() {
                        created.push((next_due, 1));
                    } else if next_due <= flush_at {
                        created.push((wait_due(next_due).await, 1));
                    } else {
                        break;
                    }
                    next_due += iv;
                }
                permits
                    .clone()
                    .acquire_owned()
                    .await
                    .expect("the semaphore is never closed")
            }
        };
        let records = build_records(&created, spec.record_bytes, spec.stamp, &fixed, &mut keys);
        let count = records.len() as u64;
        let batch = encode_batch(Offset(0), &records);
        id = id.wrapping_add(1);
        let frame = kp::produce_request(id, spec.acks, PRODUCE_TIMEOUT_MS, &spec.topic, partition, &batch);
        if wr.write_all(&frame).await.is_err() {
            rec.error("io");
            break;
        }
        let bytes = count * spec.record_bytes as u64;
        if spec.acks == 0 {
            let now = Instant::now();
            rec.ok(count, bytes);
            rec.latencies(created.iter().map(|(t, n)| (now - *t, u64::from(*n))));
            continue;
        }
        let sent = tx.send(InFlight {
            id,
            created,
            records: count,
            bytes,
            _permit: permit,
        });
        if sent.is_err() {
            break; // the reader gave up on the connection and counted why
        }
    }
    drop(tx);
    if let Some(reader) = reader {
        if tokio::time::timeout(DRAIN, reader).await.is_err() {
            rec.error("timeout");
        }
    }
}

fn build_records(
    created: &Created,
    record_bytes: usize,
    stamp: bool,
    fixed: &Bytes,
    keys: &mut Option<KeyCycle>,
) -> Vec<Record> {
    // The load generator is a client: its record timestamps are real time.
    let timestamp_ms = crate::clock::Clock::now_ms(&crate::clock::SystemClock::default());
    let mut records = Vec::with_capacity(created.iter().map(|(_, n)| *n as usize).sum());
    for (t, n) in created {
        let value = if stamp {
            Bytes::from(record_value(record_bytes, Some(*t)))
        } else {
            fixed.clone()
        };
        for _ in 0..*n {
            records.push(Record {
                timestamp_ms,
                key: keys.as_mut().map(KeyCycle::next_key),
                value: Some(value.clone()),
                headers: Vec::new(),
            });
        }
    }
    records
}

/// Matches a lane's answers to its requests, in order.
async fn read_acks(mut rd: BufReader<OwnedReadHalf>, mut rx: mpsc::UnboundedReceiver<InFlight>, rec: Arc<Recorder>) {
    while let Some(f) = rx.recv().await {
        let answer = read_response(&mut rd, f.id)
            .await
            .and_then(|mut r| kp::decode_produce_response(&mut r).map_err(malformed));
        let now = Instant::now();
        match answer {
            Ok(topics) => {
                let parts: Vec<_> = topics.iter().flat_map(|(_, ps)| ps.iter()).collect();
                match parts.iter().find(|p| p.error_code != 0) {
                    None if !parts.is_empty() => {
                        rec.ok(f.records, f.bytes);
                        rec.latencies(f.created.iter().map(|(t, n)| (now - *t, u64::from(*n))));
                    }
                    None => rec.error("empty answer"),
                    Some(p) => rec.error(kp::error_name(p.error_code)),
                }
            }
            Err(kind) => {
                // The connection is unusable: this request and every one
                // behind it fail, and the writer stops at its next send.
                rec.error(kind.clone());
                rx.close();
                while rx.recv().await.is_some() {
                    rec.error(kind.clone());
                }
                return;
            }
        }
    }
}

async fn fetch(
    conn: &mut Conn,
    topic: &str,
    partition: i32,
    offset: i64,
    wait_ms: i32,
) -> Result<FetchPartitionResponse, Kind> {
    let at = [FetchAt {
        partition,
        offset,
        max_bytes: FETCH_PARTITION_BYTES,
    }];
    let mut r = conn
        .call(|id| kp::fetch_request(id, wait_ms, 1, FETCH_MAX_BYTES, topic, &at))
        .await?;
    let resp = kp::decode_fetch_response(&mut r).map_err(malformed)?;
    if resp.error_code != 0 {
        return Err(kp::error_name(resp.error_code));
    }
    let p = resp
        .topics
        .into_iter()
        .flat_map(|(_, ps)| ps)
        .find(|p| p.partition == partition)
        .ok_or_else(|| "partition missing from the answer".to_string())?;
    if p.error_code != 0 {
        return Err(kp::error_name(p.error_code));
    }
    Ok(p)
}

async fn list_offset(conn: &mut Conn, topic: &str, partition: i32, timestamp: i64) -> Result<i64, Kind> {
    let mut r = conn
        .call(|id| kp::list_offsets_request(id, topic, &[partition], timestamp))
        .await?;
    let topics = kp::decode_list_offsets_response(&mut r).map_err(malformed)?;
    let p = topics
        .into_iter()
        .flat_map(|(_, ps)| ps)
        .find(|p| p.partition == partition)
        .ok_or_else(|| "partition missing from the answer".to_string())?;
    if p.error_code != 0 {
        return Err(kp::error_name(p.error_code));
    }
    Ok(p.offset)
}

/// Records and bytes at or after `from` in fetched record batches, and the
/// offset after the last complete batch. A batch cut short at the end of
/// the answer (Kafka allows it) ends the walk.
fn count_from(buf: &[u8], from: u64) -> (u64, u64, u64) {
    let (mut records, mut bytes, mut next) = (0, 0, from);
    for b in batches("fetch", buf) {
        let Ok((info, raw)) = b else { break };
        let end = info.end_offset().get();
        if end <= next {
            continue;
        }
        records += end - info.base_offset.get().max(next);
        bytes += raw.len() as u64;
        next = end;
    }
    (records, bytes, next)
}

/// Every partition read from its start to its end as of the start of the
/// run (or until `deadline`), each over its own connection.
pub(super) async fn consume(args: &BenchArgs, rec: Arc<Recorder>, deadline: Instant) -> anyhow::Result<()> {
    let leaders = leaders(&args.bootstrap, &args.topic).await?;
    let mut tasks = Vec::new();
    for (partition, addr) in leaders {
        let (topic, rec) = (args.topic.clone(), rec.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = match Conn::connect(&addr).await {
                Ok(c) => c,
                Err(_) => return rec.error("connect"),
            };
            let (start, end) = match (
                list_offset(&mut conn, &topic, partition, -2).await,
                list_offset(&mut conn, &topic, partition, kp::LATEST).await,
            ) {
                (Ok(s), Ok(e)) => (s.max(0) as u64, e.max(0) as u64),
                (Err(kind), _) | (_, Err(kind)) => return rec.error(kind),
            };
            let mut offset = start;
            while offset < end && Instant::now() < deadline {
                let t = Instant::now();
                match fetch(&mut conn, &topic, partition, offset as i64, 100).await {
                    Ok(p) => {
                        let (records, bytes, next) =
                            p.batches.first().map_or((0, 0, offset), |b| count_from(b, offset));
                        rec.ok(records, bytes);
                        rec.latency(t.elapsed(), 1);
                        offset = next;
                    }
                    Err(kind) => {
                        let broken = kind == "io";
                        rec.error(kind);
                        if broken {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        }));
    }
    for t in tasks {
        t.await?;
    }
    Ok(())
}

/// Long-polling consumers, one per partition, from each partition's end;
/// each record's latency is from its creation (read from its value). They
/// stop when `stop` is set.
pub(super) async fn tail(
    args: &BenchArgs,
    rec: Arc<Recorder>,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let leaders = leaders(&args.bootstrap, &args.topic).await?;
    let mut tasks = Vec::new();
    for (partition, addr) in leaders {
        let mut conn = Conn::connect(&addr)
            .await
            .map_err(|e| anyhow::anyhow!("connecting to {addr}: {e}"))?;
        let topic = args.topic.clone();
        let mut offset = list_offset(&mut conn, &topic, partition, kp::LATEST)
            .await
            .map_err(|e| anyhow::anyhow!("the end of partition {partition}: {e}"))?
            .max(0) as u64;
        let (rec, stop) = (rec.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                match fetch(&mut conn, &topic, partition, offset as i64, TAIL_WAIT_MS).await {
                    Ok(p) => {
                        let now = Instant::now();
                        let Some(buf) = p.batches.first() else { continue };
                        let mut latencies = Vec::new();
                        let (mut records, mut bytes) = (0, 0);
                        for b in batches("fetch", buf) {
                            let Ok((_, raw)) = b else { break };
                            let Ok(decoded) = decode_records("fetch", raw) else {
                                rec.error("corrupt batch");
                                break;
                            };
                            for (o, r) in decoded {
                                if o.get() < offset {
                                    continue;
                                }
                                offset = o.get() + 1;
                                let value = r.value.unwrap_or_default();
                                records += 1;
                                bytes += value.len() as u64;
                                if let Some(created) = created_at(&value) {
                                    latencies.push((now.saturating_duration_since(created), 1));
                                }
                            }
                        }
                        rec.received(records, bytes);
                        rec.latencies(latencies);
                    }
                    Err(kind) => {
                        let broken = kind == "io";
                        rec.error(kind);
                        if broken {
                            return;
                        }
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
            }
        }));
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::set_base_offset;

    fn batch_at(base: u64, n: usize) -> Vec<u8> {
        let records: Vec<Record> = (0..n)
            .map(|_| Record {
                timestamp_ms: 0,
                key: None,
                value: Some(Bytes::from_static(b"v")),
                headers: Vec::new(),
            })
            .collect();
        let mut b = encode_batch(Offset(0), &records).to_vec();
        set_base_offset(&mut b, Offset(base));
        b
    }

    #[test]
    fn fetched_batches_count_only_records_from_the_fetch_offset() {
        let (a, b) = (batch_at(0, 5), batch_at(5, 3));
        let mut buf = a.clone();
        buf.extend_from_slice(&b);
        assert_eq!(count_from(&buf, 0), (8, (a.len() + b.len()) as u64, 8));
        // A batch that starts before the offset counts from the offset.
        assert_eq!(count_from(&buf, 3), (5, (a.len() + b.len()) as u64, 8));
        assert_eq!(count_from(&buf, 5), (3, b.len() as u64, 8));
        // A batch cut short at the end is left for the next fetch.
        let cut = &buf[..buf.len() - 4];
        assert_eq!(count_from(cut, 0), (5, a.len() as u64, 5));
        assert_eq!(count_from(&[], 7), (0, 0, 7));
    }

    #[test]
    fn records_carry_one_value_per_creation_instant() {
        std::sync::LazyLock::force(&super::super::EPOCH);
        let t = Instant::now();
        let fixed = Bytes::from(record_value(32, None));
        let created = vec![(t, 3), (t + Duration::from_millis(1), 1)];
        let plain = build_records(&created, 32, false, &fixed, &mut None);
        assert_eq!(plain.len(), 4);
        assert!(plain
            .iter()
            .all(|r| r.value.as_ref() == Some(&fixed) && r.key.is_none()));
        let keyed = build_records(&created, 32, false, &fixed, &mut KeyCycle::new(3, 0, 1));
        let keys: Vec<_> = keyed.iter().map(|r| r.key.clone().unwrap()).collect();
        assert_eq!(keys[0], keys[3], "four records over three keys");
        assert_ne!(keys[0], keys[1]);
        let stamped = build_records(&created, 32, true, &fixed, &mut None);
        let times: Vec<Instant> = stamped
            .iter()
            .map(|r| created_at(r.value.as_ref().unwrap()).unwrap())
            .collect();
        assert_eq!(times[0], times[2]);
        assert!(times[3] > times[0]);
    }
}
