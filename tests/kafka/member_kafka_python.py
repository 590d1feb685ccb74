"""A consumer-group member on kafka-python, speaking the memberlib.py line
protocol (classic protocol only: kafka-python has no KIP-848 consumer)."""

import os
import sys

from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata
from memberlib import commands, emit, next_command, parse


def main():
    o = parse(sys.argv[1:])
    extra = {"group_instance_id": o["instance"]} if o["instance"] else {}
    c = KafkaConsumer(
        bootstrap_servers=o["bootstrap"],
        group_id=o["group"],
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=o["session_ms"],
        heartbeat_interval_ms=500,
        fetch_max_wait_ms=200,
        **extra,
    )
    pending = {}

    def commit():
        if not pending:
            return
        offsets = {TopicPartition(o["topic"], p): OffsetAndMetadata(off, "", -1) for p, off in pending.items()}
        try:
            c.commit(offsets)
            emit({"event": "committed", "offsets": {str(p): off for p, off in pending.items()}})
            pending.clear()
        except Exception as e:  # noqa: BLE001 - reported, and the member carries on
            emit({"event": "commit_failed", "error": repr(e)})

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            commit()
            for tp in revoked:
                pending.pop(tp.partition, None)
            emit({"event": "revoked", "partitions": sorted(tp.partition for tp in revoked)})

        def on_partitions_assigned(self, assigned):
            emit({"event": "assigned", "partitions": sorted(tp.partition for tp in assigned)})

    c.subscribe([o["topic"]], listener=Listener())
    q = commands()
    while True:
        cmd = next_command(q)
        if cmd == "crash":
            os._exit(0)
        if cmd == "leave":
            commit()
            c.close()
            emit({"event": "closed"})
            return
        got = False
        try:
            polled = c.poll(timeout_ms=200)
        except Exception as e:  # noqa: BLE001
            emit({"event": "error", "error": repr(e)})
            continue
        for records in polled.values():
            for r in records:
                emit({"event": "record", "p": r.partition, "o": r.offset, "v": r.value.decode()})
                pending[r.partition] = r.offset + 1
                got = True
        if got:
            commit()


if __name__ == "__main__":
    main()
