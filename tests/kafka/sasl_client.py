"""confluent-kafka (librdkafka) against a node with --auth on, driven by tests/kafka_auth.rs.

Usage: SASL_PASSWORD=<token> sasl_client.py produce|consume|group BOOTSTRAP TOPIC PROTOCOL

PROTOCOL is a librdkafka security.protocol (SASL_PLAINTEXT or PLAINTEXT);
with SASL the mechanism is PLAIN, the user name is free and the password is
a Sluice token. Prints one JSON object: for produce, the delivery result of
one record ({"delivered": bool, "error": name or null}) and the client
errors seen; for consume, the values read from partition 0. Never exits
non-zero for a refused request: the test judges the outcome.
"""

import json
import os
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

TIMEOUT_S = 12


def conf(bootstrap, protocol, password):
    c = {
        "bootstrap.servers": bootstrap,
        "security.protocol": protocol,
        "socket.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 500,
    }
    if protocol.startswith("SASL"):
        c.update({"sasl.mechanism": "PLAIN", "sasl.username": "any-user", "sasl.password": password})
    return c


def produce(bootstrap, topic, protocol, password):
    errors = []
    c = conf(bootstrap, protocol, password)
    c.update({"acks": "all", "message.timeout.ms": TIMEOUT_S * 1000, "error_cb": lambda e: errors.append(e.name())})
    p = Producer(c)
    result = {"delivered": False, "error": None}

    def report(err, _msg):
        if err is None:
            result["delivered"] = True
        else:
            result["error"] = err.name()

    p.produce(topic, value=b"secret-free-value", on_delivery=report)
    p.flush(TIMEOUT_S + 5)
    result["client_errors"] = sorted(set(errors))
    print(json.dumps(result))


def consume(bootstrap, topic, protocol, password):
    errors = []
    c = conf(bootstrap, protocol, password)
    c.update({"group.id": "sasl-test", "enable.auto.commit": False, "error_cb": lambda e: errors.append(e.name())})
    consumer = Consumer(c)
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    values = []
    deadline = time.time() + TIMEOUT_S
    while time.time() < deadline and not values:
        m = consumer.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() != KafkaError._PARTITION_EOF:
                errors.append(m.error().name())
            continue
        values.append(m.value().decode())
    consumer.close()
    print(json.dumps({"values": values, "client_errors": sorted(set(errors))}))


def group(bootstrap, topic, protocol, password):
    """Read one record as a member of a consumer group and commit it."""
    errors = []
    c = conf(bootstrap, protocol, password)
    c.update({
        "group.id": "sasl-group",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "error_cb": lambda e: errors.append(e.name()),
    })
    consumer = Consumer(c)
    consumer.subscribe([topic])
    values, committed = [], None
    deadline = time.time() + TIMEOUT_S * 2
    while time.time() < deadline and not values:
        m = consumer.poll(0.5)
        if m is None:
            continue
        if m.error():
            errors.append(m.error().name())
            continue
        values.append(m.value().decode())
        try:
            parts = consumer.commit(message=m, asynchronous=False)
            committed = [p.offset for p in parts if p.error is None]
        except Exception as e:  # a refused commit is a result, not a crash
            errors.append(str(e))
    consumer.close()
    print(json.dumps({"values": values, "committed": committed, "client_errors": sorted(set(errors))}))


def main():
    mode, bootstrap, topic, protocol = sys.argv[1:5]
    password = os.environ.get("SASL_PASSWORD", "")
    {"produce": produce, "consume": consume, "group": group}[mode](bootstrap, topic, protocol, password)


if __name__ == "__main__":
    main()
