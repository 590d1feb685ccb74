"""An exactly-once consume-transform-produce pipeline with confluent-kafka
(librdkafka's transaction manager, unmodified), in three modes:

  txn_pipeline.py fill BOOTSTRAP IN COUNT
      COUNT records into IN's 3 partitions (an idempotent producer);
      values "p<partition>-<i>", dense per partition.
  txn_pipeline.py run BOOTSTRAP IN OUT GROUP TXN_ID BATCH
      reads IN read_committed as a member of GROUP, and for each batch of
      up to BATCH records writes them to OUT (same partition, value
      "out:<input value>") and commits the input positions, in one
      transaction; until the group's positions reach IN's end.
  txn_pipeline.py verify BOOTSTRAP IN OUT GROUP
      reads OUT read_committed from the start and compares it with IN.

Prints JSON lines. In run mode: {"event": "committed", "progress": n,
"t": unix time} after each commit, {"event": "sent", ...} once a
transaction's records are stored and before its offsets are sent (n = the group's input positions summed),
{"event": "aborted", ...} / {"event": "retry", ...} / {"event": "fatal", ...}
on errors, {"event": "client_hang", ...} before exiting with HANG_EXIT when
librdkafka's send_offsets_to_transaction outlives its own timeout (see
`bounded`), and {"event": "done", ...} at the end.

Environment switches of run mode:
  TXN_PIPELINE_DEBUG (for example "cgrp,fetch") turns on those librdkafka
      debug contexts in the pipeline's consumer;
  TXN_PIPELINE_PRODUCER_DEBUG (for example "eos,broker") the same in its
      transactional producer;
  TXN_PIPELINE_HANG_LIMIT_S how long send_offsets_to_transaction may run
      before the process gives up on its producer (default: its own
      timeout, 30 s, plus 15 s);
  TXN_PIPELINE_FAKE_HANG=PROGRESS:MARKER stands in for librdkafka#5511 in
      tests: unless the file MARKER exists, the first send_offsets once this
      process has committed PROGRESS input positions creates MARKER and
      blocks forever instead of calling librdkafka, so the client_hang path
      runs (once across restarts, thanks to MARKER).
"""

import os
import sys
import threading
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from txnlib import emit, read_to_end

PARTITIONS = 3

# send_offsets_to_transaction's own timeout, and how long past it the call
# may run before the process gives up on its producer.
SEND_OFFSETS_TIMEOUT_S = 30
HANG_LIMIT_S = float(os.environ.get("TXN_PIPELINE_HANG_LIMIT_S", SEND_OFFSETS_TIMEOUT_S + 15))
# The exit code after a client_hang event: the caller restarts the process.
HANG_EXIT = 3


def fill(bootstrap, topic, count):
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20})
    per = [0] * PARTITIONS
    for i in range(count):
        part = i % PARTITIONS
        while True:
            try:
                p.produce(topic, value=f"p{part}-{per[part]}", partition=part)
                break
            except BufferError:
                p.poll(0.05)
        per[part] += 1
        p.poll(0)
    left = p.flush(60)
    emit(event="filled", count=count, unflushed=left)


def highs(consumer, topic):
    return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)]


def new_consumer(bootstrap, group, topic):
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "topic.metadata.refresh.interval.ms": 1000,
            "reconnect.backoff.max.ms": 500,
            **({"debug": os.environ["TXN_PIPELINE_DEBUG"]} if os.environ.get("TXN_PIPELINE_DEBUG") else {}),
        }
    )
    c.subscribe([topic])
    return c


def new_producer(bootstrap, txn_id):
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 60000,
            "linger.ms": 5,
            "topic.metadata.refresh.interval.ms": 1000,
            "reconnect.backoff.max.ms": 500,
            **(
                {"debug": os.environ["TXN_PIPELINE_PRODUCER_DEBUG"]}
                if os.environ.get("TXN_PIPELINE_PRODUCER_DEBUG")
                else {}
            ),
        }
    )
    p.init_transactions(120)
    return p


def positions(consumer, assignment, known):
    """Where the member is in each assigned partition: past the last record
    it consumed, else where this process last committed, else the group's
    committed offset (None while the coordinator cannot say)."""
    pos = {tp.partition: tp.offset for tp in consumer.position(assignment)}
    for p, off in list(pos.items()):
        if off < 0 and p in known:
            pos[p] = known[p]
    unknown = [TopicPartition(tp.topic, tp.partition) for tp in assignment if pos[tp.partition] < 0]
    if unknown:
        try:
            for tp in consumer.committed(unknown, timeout=10):
                pos[tp.partition] = tp.offset
        except KafkaException:
            return None
    return pos


def retrying(what, f, tries=20):
    """Call f, again while librdkafka says the error is retriable."""
    for attempt in range(tries):
        try:
            return f()
        except KafkaException as e:
            err = e.args[0]
            if err.retriable() and attempt + 1 < tries:
                emit(event="retry", what=what, error=err.name())
                time.sleep(0.2)
                continue
            raise


def bounded(what, f, limit_s):
    """f(), unless it runs past limit_s: then emit client_hang and exit.

    librdkafka can block in send_offsets_to_transaction past its timeout,
    forever (confluentinc/librdkafka#5511, #5456): when the group
    coordinator it cached dies and vanishes from the metadata before a
    reconnect attempt to it fails, its coordinator request waits for a state
    change of that broker, whose thread is gone, and the request's timeout is
    never checked. The call cannot be cancelled, so the process exits; the
    next instance's init_transactions fences this producer and aborts its
    open transaction, as after any crash of the pipeline."""
    box = {}

    def call():
        try:
            box["value"] = f()
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e

    worker = threading.Thread(target=call, daemon=True)
    worker.start()
    worker.join(limit_s)
    if worker.is_alive():
        emit(event="client_hang", what=what, after_s=limit_s)
        os._exit(HANG_EXIT)
    if "error" in box:
        raise box["error"]
    return box.get("value")


def fake_hang_due(progress):
    """Whether this send_offsets is the one TXN_PIPELINE_FAKE_HANG picks;
    if so, the marker is created so that no later process hangs again."""
    spec = os.environ.get("TXN_PIPELINE_FAKE_HANG")
    if not spec:
        return False
    at, marker = spec.split(":", 1)
    if progress < int(at) or os.path.exists(marker):
        return False
    with open(marker, "x"):
        pass
    return True


def hang_forever():
    threading.Event().wait()


def run(bootstrap, src, dst, group, txn_id, batch):
    producer = new_producer(bootstrap, txn_id)
    consumer = new_consumer(bootstrap, group, src)
    end = None
    commits = aborts = fatals = 0
    # Partition -> the input position this process last committed.
    known = {}
    idle_report = time.time()
    while True:
        msgs = consumer.consume(num_messages=batch, timeout=0.5)
        msgs = [m for m in msgs if m.error() is None]
        assignment = consumer.assignment()
        if not msgs:
            if assignment and len(assignment) == PARTITIONS:
                if end is None:
                    end = highs(consumer, src)
                at = positions(consumer, assignment, known)
                if at is not None and all(off >= end[p] for p, off in at.items()):
                    break
            if time.time() - idle_report > 2:
                idle_report = time.time()
                emit(event="idle", assigned=len(assignment), end=end, known=known)
            continue
        try:
            producer.begin_transaction()
            for m in msgs:
                while True:
                    try:
                        producer.produce(dst, value=b"out:" + m.value(), partition=m.partition())
                        break
                    except BufferError:
                        producer.poll(0.05)
            # The records are stored (in the open transaction) before the
            # offsets are sent: a kill from here on leaves them to abort.
            producer.flush(60)
            emit(event="sent", progress=sum(known.values()), records=len(msgs))
            # Partitions with nothing consumed yet are at a negative
            # position, which librdkafka leaves out of the commit.
            at = consumer.position(assignment)
            meta = consumer.consumer_group_metadata()
            send = (
                hang_forever
                if fake_hang_due(sum(known.values()))
                else lambda: producer.send_offsets_to_transaction(at, meta, SEND_OFFSETS_TIMEOUT_S)
            )
            retrying("send_offsets", lambda: bounded("send_offsets", send, HANG_LIMIT_S))
            retrying("commit", lambda: producer.commit_transaction(60))
            commits += 1
            known.update({tp.partition: tp.offset for tp in at if tp.offset >= 0})
            emit(event="committed", progress=sum(known.values()), records=len(msgs))
        except KafkaException as e:
            err = e.args[0]
            if err.txn_requires_abort():
                aborts += 1
                emit(event="aborted", error=err.name(), message=err.str())
                retrying("abort", lambda: producer.abort_transaction(60))
            else:
                # Fenced or otherwise fatal: a new producer (its init aborts
                # what this one left open).
                fatals += 1
                emit(event="fatal", error=err.name(), message=err.str())
                producer = new_producer(bootstrap, txn_id)
            # Back to the group's committed positions: a new member reads
            # from them.
            consumer.close()
            consumer = new_consumer(bootstrap, group, src)
    emit(event="done", commits=commits, aborts=aborts, fatals=fatals, end=end)
    consumer.close()


def read_output(bootstrap, dst, isolation):
    """OUT's (partition, value) pairs from the start to its end (the last
    stable offset for read_committed), in partition order; whether every
    partition reached its end."""
    out, reached_end = read_to_end(bootstrap, dst, PARTITIONS, isolation)
    return [(p, v) for p in range(PARTITIONS) for _, v in out[p]], reached_end


def verify(bootstrap, src, dst, group):
    out, reached_end = read_output(bootstrap, dst, "read_committed")
    values = [v for _, v in out]
    wrong_partition = out_of_order = 0
    last = {}
    for part, v in out:
        if not v.startswith(f"out:p{part}-"):
            wrong_partition += 1
            continue
        i = int(v.rsplit("-", 1)[1])
        if last.get(part, -1) >= i:
            out_of_order += 1
        last[part] = i
    # What aborted transactions left in the log, hidden from the above.
    uncommitted, _ = read_output(bootstrap, dst, "read_uncommitted")
    # The group's committed positions.
    g = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    committed = [tp.offset for tp in g.committed([TopicPartition(src, p) for p in range(PARTITIONS)], timeout=20)]
    end = highs(g, src)
    g.close()
    expected = {f"out:p{p}-{i}" for p in range(PARTITIONS) for i in range(end[p])}
    got = set(values)
    emit(
        event="verified",
        reached_end=reached_end,
        output=len(values),
        stored_uncommitted=len(uncommitted),
        distinct=len(got),
        duplicates=len(values) - len(got),
        missing=len(expected - got),
        strangers=len(got - expected),
        wrong_partition=wrong_partition,
        out_of_order=out_of_order,
        input_end=end,
        committed=committed,
    )


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "fill":
        fill(args[0], args[1], int(args[2]))
    elif mode == "run":
        run(args[0], args[1], args[2], args[3], args[4], int(args[5]))
    elif mode == "verify":
        verify(args[0], args[1], args[2], args[3])
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
