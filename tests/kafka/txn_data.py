"""Transactions that write records, with confluent-kafka (librdkafka's
transaction manager, unmodified). Prints one JSON line per step:

- rounds: ROUNDS transactions over the topic's 3 partitions, committed
  and aborted alternately; then what a read_committed and a
  read_uncommitted consumer read from the start.
- zombie: a second instance with the same transactional.id fences the
  first, whose later produce and commit are refused.
- timeout: a transaction left open past transaction.timeout.ms is aborted
  by the coordinator, and the partition's last stable offset moves on.
- final: every partition's values as read_committed and read_uncommitted
  consumers read them at the end.

usage: txn_data.py BOOTSTRAP TOPIC ROUNDS PER_ROUND
"""

import sys
import time

from confluent_kafka import KafkaException, Producer
from txnlib import emit, read_to_end

PARTITIONS = 3


def producer(bootstrap, txn_id, timeout_ms=60000):
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": timeout_ms,
            "linger.ms": 5,
        }
    )
    p.init_transactions(30)
    return p


def read_all(bootstrap, topic, isolation):
    return read_to_end(bootstrap, topic, PARTITIONS, isolation, deadline_s=60)


def error_name(f):
    """None when f succeeds, else what the client said (after a fatal
    error librdkafka refuses further calls, which are errors too)."""
    try:
        f()
        return None
    except KafkaException as e:
        err = e.args[0]
        try:
            return {"name": err.name(), "fatal": err.fatal(), "abortable": err.txn_requires_abort()}
        except Exception:
            return {"name": str(err), "fatal": None, "abortable": None}
    except Exception as e:  # BufferError, SystemError from a fatal producer
        return {"name": type(e).__name__, "message": str(e), "fatal": None, "abortable": None}


def main():
    import traceback
    try:
        run()
    except Exception:
        traceback.print_exc(file=sys.stdout)
        sys.exit(1)


def run():
    bootstrap, topic, rounds, per = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    p = producer(bootstrap, "txn-data")
    committed, aborted = [], []
    commit_ms = []
    for r in range(rounds):
        p.begin_transaction()
        values = [f"r{r}-{i}" for i in range(per)]
        for i, v in enumerate(values):
            p.produce(topic, value=v, partition=i % PARTITIONS)
        if r % 2 == 0:
            t = time.time()
            p.commit_transaction(30)
            commit_ms.append((time.time() - t) * 1000)
            committed.extend(values)
        else:
            # Flushed first: abort_transaction purges what was not sent.
            p.flush(30)
            p.abort_transaction(30)
            aborted.extend(values)
    emit(step="rounds", committed=len(committed), aborted=len(aborted), commit_ms=sorted(commit_ms))

    rc, rc_done = read_all(bootstrap, topic, "read_committed")
    ru, ru_done = read_all(bootstrap, topic, "read_uncommitted")
    rc_values = [v for p in rc.values() for _, v in p]
    ru_values = [v for p in ru.values() for _, v in p]
    in_order = all(
        [v for _, v in rc[part]] == [v for i, v in enumerate(committed) if int(v.split("-")[1]) % PARTITIONS == part]
        for part in range(PARTITIONS)
    )
    emit(
        step="read",
        committed_reached_end=rc_done,
        uncommitted_reached_end=ru_done,
        read_committed=len(rc_values),
        read_committed_exact=sorted(rc_values) == sorted(committed),
        read_committed_in_order=in_order,
        read_committed_aborted=len([v for v in rc_values if v in set(aborted)]),
        read_uncommitted=len(ru_values),
        read_uncommitted_exact=sorted(ru_values) == sorted(committed + aborted),
        # A control record surfacing as a message would not be one of ours.
        strangers=len([v for v in ru_values if not v.startswith("r")]),
        uncommitted_per_partition={p: len(v) for p, v in ru.items()},
        uncommitted_sample=ru_values[:3] + ru_values[-3:],
    )

    # Zombie fencing.
    z1 = producer(bootstrap, "txn-zombie")
    z1.begin_transaction()
    z1.produce(topic, value="z-before", partition=0)
    z1.flush(10)
    z2 = producer(bootstrap, "txn-zombie")  # fences z1, aborts its transaction
    # Partition 0 is in z1's transaction already: this goes straight to the
    # leader, which the abort marker at the bumped epoch fenced.
    produce_after_error = error_name(lambda: z1.produce(topic, value="z-after", partition=0))
    flush_error = error_name(lambda: z1.flush(10))
    # A partition not in it needs AddPartitionsToTxn, which the coordinator refuses.
    add_error = error_name(lambda: (z1.produce(topic, value="z-after", partition=1), z1.flush(10)))
    produce_error = error_name(lambda: z1.commit_transaction(10))
    z2.begin_transaction()
    z2.produce(topic, value="z-second", partition=2)
    z2.commit_transaction(30)
    rc, _ = read_all(bootstrap, topic, "read_committed")
    seen = {v for p in rc.values() for _, v in p}
    emit(
        step="zombie",
        commit_error=produce_error,
        flush_error=flush_error,
        add_error=add_error,
        produce_after_error=produce_after_error,
        before_visible="z-before" in seen,
        after_visible="z-after" in seen,
        second_visible="z-second" in seen,
    )

    # A transaction left open past its timeout.
    t = producer(bootstrap, "txn-timeout", timeout_ms=2000)
    t.begin_transaction()
    t.produce(topic, value="t-open", partition=0)
    t.flush(10)
    started = time.time()
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce(topic, value="after-timeout", partition=0)
    plain.flush(10)
    # The plain record is visible to read_committed only once the open
    # transaction before it ended: the coordinator's abort.
    visible_after = None
    while time.time() - started < 30:
        rc, _ = read_all(bootstrap, topic, "read_committed")
        seen = {v for p in rc.values() for _, v in p}
        if "after-timeout" in seen:
            visible_after = time.time() - started
            break
        time.sleep(0.5)
    commit_error = error_name(lambda: t.commit_transaction(10))
    emit(
        step="timeout",
        plain_visible_after_s=visible_after,
        open_visible="t-open" in seen,
        commit_error=commit_error,
    )

    # Everything, as Kafka consumers read it at the end: for the test to
    # compare with HTTP reads.
    rc, _ = read_all(bootstrap, topic, "read_committed")
    ru, _ = read_all(bootstrap, topic, "read_uncommitted")
    emit(
        step="final",
        read_committed={p: [v for _, v in rc[p]] for p in range(PARTITIONS)},
        read_uncommitted={p: [v for _, v in ru[p]] for p in range(PARTITIONS)},
    )


if __name__ == "__main__":
    main()
