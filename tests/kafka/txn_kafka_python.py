"""Transactions that write records, with kafka-python (its own transaction
manager, unmodified), driven by tests/kafka_transactions_clients.rs.
Prints one JSON line per step:

- rounds: ROUNDS transactions of PER_ROUND records over the topic's 3
  partitions (record i to partition i % 3), committed and aborted
  alternately, with each commit's latency.
- read: what a read_committed and a read_uncommitted consumer read from
  the start, by manual assignment, up to each partition's end offset
  (ListOffsets latest at the consumer's isolation level: the last stable
  offset for read_committed, the high watermark otherwise).
- zombie: a second producer with the same transactional_id fences the
  first, whose later produce and commit are refused, and whose attempt to
  bump its epoch after the refused produce (KIP-360) is refused too.

usage: txn_kafka_python.py BOOTSTRAP TOPIC ROUNDS PER_ROUND
"""

import faulthandler
import json
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

PARTITIONS = 3
# kafka-python's commit_transaction and abort_transaction wait without a
# timeout: dump the stacks and exit rather than hang past the Rust test's own.
faulthandler.dump_traceback_later(240, exit=True)


def emit(**kw):
    print(json.dumps(kw), flush=True)


def producer(bootstrap, txn_id):
    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=txn_id,
        transaction_timeout_ms=60000,
        linger_ms=5,
        max_block_ms=30000,
        request_timeout_ms=15000,
    )
    p.init_transactions()
    return p


def read_all(bootstrap, topic, isolation, deadline_s=60):
    """Every record from offset 0 to the partition's end offset, per
    partition in order; and whether every partition reached its end."""
    c = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        isolation_level=isolation,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=200,
        request_timeout_ms=15000,
    )
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    c.assign(tps)
    for tp in tps:
        c.seek(tp, 0)
    end = c.end_offsets(tps)
    out = {p: [] for p in range(PARTITIONS)}
    deadline = time.time() + deadline_s

    def done():
        return all(c.position(tp) >= end[tp] for tp in tps)

    while not done() and time.time() < deadline:
        for tp, recs in c.poll(timeout_ms=500).items():
            out[tp.partition].extend((r.offset, r.value.decode()) for r in recs)
    reached = done()
    positions = {tp.partition: c.position(tp) for tp in tps}
    c.close()
    return out, reached, {tp.partition: end[tp] for tp in tps}, positions


def error_of(f):
    """None when f succeeds, else the exception's type and message."""
    try:
        f()
        return None
    except Exception as e:  # the client's KafkaError subclasses, and others
        return {"name": type(e).__name__, "message": str(e)}


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else None


def main():
    import traceback

    try:
        run()
    except Exception:
        traceback.print_exc(file=sys.stderr)
        sys.exit(1)


def run():
    bootstrap, topic, rounds, per = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    p = producer(bootstrap, "txn-kafka-python")
    committed, aborted = [], []
    commit_ms = []
    for r in range(rounds):
        p.begin_transaction()
        values = [f"r{r}-{i}" for i in range(per)]
        futures = [p.send(topic, value=v.encode(), partition=i % PARTITIONS) for i, v in enumerate(values)]
        if r % 2 == 0:
            t = time.time()
            p.commit_transaction()  # flushes first
            commit_ms.append(round((time.time() - t) * 1000, 2))
            committed.extend(values)
        else:
            # Sent first, so the aborted records are in the log.
            p.flush(30)
            for f in futures:
                f.get(timeout=10)
            p.abort_transaction()
            aborted.extend(values)
    p.close(10)
    emit(
        step="rounds",
        committed=len(committed),
        aborted=len(aborted),
        commit_ms_p50=percentile(commit_ms, 0.5),
        commit_ms_max=max(commit_ms),
        commit_ms=sorted(commit_ms),
    )

    rc, rc_done, rc_end, rc_pos = read_all(bootstrap, topic, "read_committed")
    ru, ru_done, ru_end, ru_pos = read_all(bootstrap, topic, "read_uncommitted")
    rc_values = [v for part in rc.values() for _, v in part]
    ru_values = [v for part in ru.values() for _, v in part]
    aborted_set = set(aborted)

    def expected(values, part):
        return [v for v in values if int(v.split("-")[1]) % PARTITIONS == part]

    emit(
        step="read",
        committed_reached_end=rc_done,
        uncommitted_reached_end=ru_done,
        committed_end_offsets=rc_end,
        committed_positions=rc_pos,
        uncommitted_end_offsets=ru_end,
        read_committed=len(rc_values),
        read_committed_exact=sorted(rc_values) == sorted(committed),
        read_committed_in_order=all([v for _, v in rc[part]] == expected(committed, part) for part in range(PARTITIONS)),
        read_committed_aborted=len([v for v in rc_values if v in aborted_set]),
        read_uncommitted=len(ru_values),
        read_uncommitted_exact=sorted(ru_values) == sorted(committed + aborted),
        read_uncommitted_in_order=all(
            [v for _, v in ru[part]] == expected([f"r{r}-{i}" for r in range(rounds) for i in range(per)], part)
            for part in range(PARTITIONS)
        ),
        # A control record surfacing as a record would not be one of ours.
        strangers=len([v for v in ru_values if not v.startswith("r")]),
        uncommitted_per_partition={part: len(v) for part, v in ru.items()},
        uncommitted_sample=ru_values[:3] + ru_values[-3:],
    )

    # Zombie fencing.
    z1 = producer(bootstrap, "txn-kafka-python-zombie")
    z1.begin_transaction()
    z1.send(topic, value=b"z-before", partition=0).get(timeout=10)
    z2 = producer(bootstrap, "txn-kafka-python-zombie")  # fences z1, aborts its transaction
    # Partition 0 is in z1's transaction already: this goes straight to the
    # leader, which the abort marker at the bumped epoch fenced.
    produce_error = error_of(lambda: z1.send(topic, value=b"z-after", partition=0).get(timeout=10))
    # A partition not in it needs AddPartitionsToTxn, which the coordinator refuses.
    add_error = error_of(lambda: z1.send(topic, value=b"z-after", partition=1).get(timeout=10))
    commit_error = error_of(z1.commit_transaction)
    # kafka-python takes the refused batch (INVALID_PRODUCER_EPOCH) as a
    # KIP-360 cue to bump its epoch: InitProducerId with its producer id and
    # old epoch, which the coordinator must refuse (PRODUCER_FENCED), or the
    # zombie would fence the second instance. Until that answer the client
    # refuses by its own state (BUMPING_PRODUCER_EPOCH); then by the error.
    final_error = commit_error
    deadline = time.time() + 10
    while "error state" not in (final_error or {}).get("message", "") and time.time() < deadline:
        time.sleep(0.1)
        final_error = error_of(z1.commit_transaction)
    z1.close(5)
    z2.begin_transaction()
    z2.send(topic, value=b"z-second", partition=2)
    z2.commit_transaction()
    z2.close(10)
    rc, rc_done, _, _ = read_all(bootstrap, topic, "read_committed")
    seen = {v for part in rc.values() for _, v in part}
    emit(
        step="zombie",
        produce_error=produce_error,
        add_error=add_error,
        commit_error=commit_error,
        final_error=final_error,
        reached_end=rc_done,
        before_visible="z-before" in seen,
        after_visible="z-after" in seen,
        second_visible="z-second" in seen,
    )


if __name__ == "__main__":
    main()
