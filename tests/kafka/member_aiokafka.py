"""A consumer-group member on aiokafka (asyncio), speaking the memberlib.py
line protocol (classic protocol)."""

import asyncio
import os
import sys

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from memberlib import commands, emit, next_command, parse


async def main():
    o = parse(sys.argv[1:])
    extra = {"group_instance_id": o["instance"]} if o["instance"] else {}
    c = AIOKafkaConsumer(
        bootstrap_servers=o["bootstrap"].split(","),
        group_id=o["group"],
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=o["session_ms"],
        heartbeat_interval_ms=500,
        fetch_max_wait_ms=200,
        **extra,
    )
    pending = {}

    async def commit():
        if not pending:
            return
        offsets = {TopicPartition(o["topic"], p): off for p, off in pending.items()}
        try:
            await c.commit(offsets)
            emit({"event": "committed", "offsets": {str(p): off for p, off in pending.items()}})
            pending.clear()
        except Exception as e:  # noqa: BLE001 - reported, and the member carries on
            emit({"event": "commit_failed", "error": repr(e)})

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked):
            await commit()
            for tp in revoked:
                pending.pop(tp.partition, None)
            emit({"event": "revoked", "partitions": sorted(tp.partition for tp in revoked)})

        async def on_partitions_assigned(self, assigned):
            emit({"event": "assigned", "partitions": sorted(tp.partition for tp in assigned)})

    await c.start()
    c.subscribe([o["topic"]], listener=Listener())
    q = commands()
    while True:
        cmd = next_command(q)
        if cmd == "crash":
            os._exit(0)
        if cmd == "leave":
            await commit()
            try:
                await c.stop()
            except BaseException as e:  # noqa: BLE001 - aiokafka 0.14 may raise CancelledError from a fetch still backing off
                emit({"event": "error", "error": f"stop: {e!r}"})
            emit({"event": "closed"})
            return
        try:
            polled = await c.getmany(timeout_ms=200, max_records=200)
        except Exception as e:  # noqa: BLE001
            emit({"event": "error", "error": repr(e)})
            await asyncio.sleep(0.2)
            continue
        got = False
        for records in polled.values():
            for r in records:
                emit({"event": "record", "p": r.partition, "o": r.offset, "v": r.value.decode()})
                pending[r.partition] = r.offset + 1
                got = True
        if got:
            await commit()


if __name__ == "__main__":
    asyncio.run(main())
