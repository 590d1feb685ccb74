"""SASL/SCRAM logins from real clients, driven by tests/kafka_scram.rs.

Usage: SASL_USERNAME=<token id> SASL_PASSWORD=<token> \
       scram_client.py confluent|kafka-python produce|consume BOOTSTRAP TOPIC MECHANISM

MECHANISM is SCRAM-SHA-256 or SCRAM-SHA-512; the user name is the token's
id and the password the whole token. Prints one JSON object: for produce,
{"delivered": bool, "error": name or null, "client_errors": [...]}; for
consume, {"values": [...], "client_errors": [...]} (partition 0 from the
start). Never exits non-zero for a refused login: the test judges it.
"""

import json
import os
import sys
import time

TIMEOUT_S = 12
VALUE = b"scram-value"


def confluent_conf(bootstrap, mechanism, user, password, errors):
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
        "socket.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 500,
        "error_cb": lambda e: errors.append(e.name()),
    }


def confluent_produce(bootstrap, topic, mechanism, user, password):
    from confluent_kafka import Producer

    errors = []
    c = confluent_conf(bootstrap, mechanism, user, password, errors)
    c.update({"acks": "all", "message.timeout.ms": TIMEOUT_S * 1000})
    p = Producer(c)
    result = {"delivered": False, "error": None}

    def report(err, _msg):
        if err is None:
            result["delivered"] = True
        else:
            result["error"] = err.name()

    p.produce(topic, value=VALUE, on_delivery=report)
    p.flush(TIMEOUT_S + 5)
    result["client_errors"] = sorted(set(errors))
    return result


def confluent_consume(bootstrap, topic, mechanism, user, password):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    errors = []
    c = confluent_conf(bootstrap, mechanism, user, password, errors)
    c.update({"group.id": "scram-test", "enable.auto.commit": False})
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
    return {"values": values, "client_errors": sorted(set(errors))}


def kp_conf(bootstrap, mechanism, user, password):
    return {
        "bootstrap_servers": bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
        "request_timeout_ms": 10000,
    }


def kp_produce(bootstrap, topic, mechanism, user, password):
    from kafka import KafkaProducer

    try:
        p = KafkaProducer(acks="all", enable_idempotence=False, max_block_ms=TIMEOUT_S * 1000,
                          **kp_conf(bootstrap, mechanism, user, password))
        p.send(topic, value=VALUE).get(timeout=TIMEOUT_S)
        p.close(timeout=5)
        return {"delivered": True, "error": None, "client_errors": []}
    except Exception as e:  # a refused login is a result, not a crash
        return {"delivered": False, "error": type(e).__name__, "client_errors": [str(e)[:300]]}


def kp_consume(bootstrap, topic, mechanism, user, password):
    from kafka import KafkaConsumer, TopicPartition

    values, errors = [], []
    try:
        c = KafkaConsumer(enable_auto_commit=False, **kp_conf(bootstrap, mechanism, user, password))
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        deadline = time.time() + TIMEOUT_S
        while time.time() < deadline and not values:
            for records in c.poll(timeout_ms=500).values():
                values.extend(r.value.decode() for r in records)
        c.close()
    except Exception as e:  # noqa: BLE001
        errors.append(type(e).__name__)
    return {"values": values, "client_errors": errors}


def main():
    lib, mode, bootstrap, topic, mechanism = sys.argv[1:6]
    user = os.environ.get("SASL_USERNAME", "")
    password = os.environ.get("SASL_PASSWORD", "")
    run = {
        ("confluent", "produce"): confluent_produce,
        ("confluent", "consume"): confluent_consume,
        ("kafka-python", "produce"): kp_produce,
        ("kafka-python", "consume"): kp_consume,
    }[(lib, mode)]
    print(json.dumps(run(bootstrap, topic, mechanism, user, password)))


if __name__ == "__main__":
    main()
