"""Transactional offset commits with confluent-kafka (librdkafka's
transaction manager, unmodified): a producer whose transactions commit a
group's offsets and write nothing, since Sluice does not accept
transactional batches yet. Prints one JSON line per step.

usage: txn_offsets.py BOOTSTRAP TOPIC GROUP
"""

import json
import sys

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def emit(**kw):
    print(json.dumps(kw), flush=True)


def committed(bootstrap, topic, group):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=20)
        return {str(tp.partition): tp.offset for tp in got}
    finally:
        c.close()


def producer(bootstrap, txn_id):
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 60000,
        }
    )
    p.init_transactions(30)
    return p


def main():
    bootstrap, topic, group = sys.argv[1:4]
    meta_consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    meta = meta_consumer.consumer_group_metadata()

    p = producer(bootstrap, "txn-offsets")
    emit(step="init")

    # Committed: the offsets become the group's.
    p.begin_transaction()
    p.send_offsets_to_transaction([TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 7)], meta, 30)
    emit(step="sent", before_commit=committed(bootstrap, topic, group))
    p.commit_transaction(30)
    emit(step="committed", offsets=committed(bootstrap, topic, group))

    # Aborted: they do not.
    p.begin_transaction()
    p.send_offsets_to_transaction([TopicPartition(topic, 0, 9)], meta, 30)
    p.abort_transaction(30)
    emit(step="aborted", offsets=committed(bootstrap, topic, group))

    # A second instance of the same transactional id fences the first.
    p2 = producer(bootstrap, "txn-offsets")
    try:
        p.begin_transaction()
        p.send_offsets_to_transaction([TopicPartition(topic, 0, 11)], meta, 30)
        p.commit_transaction(30)
        emit(step="fenced", error=None)
    except KafkaException as e:
        err = e.args[0]
        emit(step="fenced", error=err.name(), fatal=err.fatal())
    p2.begin_transaction()
    p2.send_offsets_to_transaction([TopicPartition(topic, 0, 12)], meta, 30)
    p2.commit_transaction(30)
    emit(step="second", offsets=committed(bootstrap, topic, group))
    meta_consumer.close()


if __name__ == "__main__":
    main()
