"""What the confluent-kafka transaction scripts (txn_data.py,
txn_pipeline.py) share: JSON lines out, and reading a topic to its end."""

import json
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition


def emit(**kw):
    """One JSON line on stdout, stamped with the unix time."""
    kw.setdefault("t", time.time())
    print(json.dumps(kw), flush=True)


def read_to_end(bootstrap, topic, partitions, isolation, deadline_s=120):
    """Every message of the topic's first `partitions` partitions from the
    start to their end (the last stable offset for read_committed):
    {partition: [(offset, value)]} in offset order, and whether every
    partition reached its end before the deadline."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "read-" + isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out = {p: [] for p in range(partitions)}
    eof = set()
    deadline = time.time() + deadline_s
    while len(eof) < partitions and time.time() < deadline:
        for m in c.consume(num_messages=1000, timeout=1.0):
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF
                    eof.add(m.partition())
                    continue
                raise KafkaException(m.error())
            eof.discard(m.partition())
            out[m.partition()].append((m.offset(), m.value().decode()))
    c.close()
    return out, len(eof) == partitions
