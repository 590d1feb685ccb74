"""Create a topic and produce to every partition at once, with no retries.

Usage: create_then_produce.py BOOTSTRAP ROUNDS PARTITIONS

Each round creates topic fresh-<n> through the admin API (waiting for the
CreateTopics answer only) and immediately produces one record to every
partition with retries off, so a leader that answers before it has caught
up with the metadata log loses the send. Prints {"rounds", "sent",
"failed": [...]} as one JSON line.
"""

import json
import sys
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def main():
    bootstrap, rounds, partitions = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    failed, sent = [], 0
    run = uuid.uuid4().hex[:6]
    for n in range(rounds):
        topic = f"fresh-{run}-{n}"
        for t, f in admin.create_topics([NewTopic(topic, partitions)], operation_timeout=10).items():
            f.result()
        p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "retries": 0,
                "retry.backoff.ms": 1,
                "linger.ms": 0,
                "message.timeout.ms": 10000,
                "topic.metadata.refresh.interval.ms": 60000,
            }
        )

        def cb(err, m, topic=topic):
            if err is not None:
                failed.append(f"{topic}: {err}")

        for part in range(partitions):
            p.produce(topic, value=f"{topic}/{part}".encode(), partition=part, on_delivery=cb)
            sent += 1
        left = p.flush(15)
        if left:
            failed.append(f"{topic}: {left} not flushed")
    print(json.dumps({"rounds": rounds, "sent": sent, "failed": failed}), flush=True)


if __name__ == "__main__":
    main()
