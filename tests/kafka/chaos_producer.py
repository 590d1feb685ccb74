"""An idempotent librdkafka producer (confluent-kafka) for tests/chaos.rs:
writes keyed messages PREFIX<i> at a steady rate until its stdin closes, then
flushes.

usage: chaos_producer.py BOOTSTRAP TOPIC RATE PREFIX

Prints one JSON line per event, as it happens:
  {"ok": [partition, offset, value]}        a delivery report: acknowledged
  {"err": [partition, value, error]}        a delivery report: librdkafka gave up
  {"pid": [producer_id, producer_epoch]}    the idempotent producer id changed
  {"fatal": "..."}                          a fatal error: the producer stops
and at the end
  {"done": {"produced": n, "unflushed": n}}
Messages PREFIX0 .. PREFIX<produced-1> were handed to librdkafka, in that order.
"""
import json
import sys
import threading
import time

from confluent_kafka import Producer

bootstrap, topic, rate, prefix = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
stop = threading.Event()
fatal = []
pid = [None]


def emit(obj):
    print(json.dumps(obj), flush=True)


def watch_stdin():
    for _ in sys.stdin:
        pass
    stop.set()


def on_delivery(err, msg):
    if err is not None:
        emit({"err": [msg.partition(), msg.value().decode(), str(err)]})
    else:
        emit({"ok": [msg.partition(), msg.offset(), msg.value().decode()]})


def on_error(err):
    if err.fatal():
        fatal.append(str(err))
        emit({"fatal": str(err)})


def on_stats(raw):
    eos = json.loads(raw).get("eos") or {}
    now = [eos.get("producer_id"), eos.get("producer_epoch")]
    if now != pid[0] and now[0] is not None and now[0] >= 0:
        pid[0] = now
        emit({"pid": now})


producer = Producer(
    {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        # Longer than any outage the chaos test makes: librdkafka keeps retrying.
        "message.timeout.ms": 120000,
        "request.timeout.ms": 10000,
        "socket.timeout.ms": 10000,
        "retry.backoff.ms": 100,
        "retry.backoff.max.ms": 1000,
        "topic.metadata.refresh.interval.ms": 1000,
        "reconnect.backoff.max.ms": 500,
        "statistics.interval.ms": 1000,
        "error_cb": on_error,
        "stats_cb": on_stats,
    }
)
threading.Thread(target=watch_stdin, daemon=True).start()

started = time.monotonic()
produced = 0
while not stop.is_set() and not fatal:
    due = int((time.monotonic() - started) * rate) + 1
    while produced < due and not fatal:
        try:
            producer.produce(
                topic, key=str(produced % 64), value=f"{prefix}{produced}", on_delivery=on_delivery
            )
            produced += 1
        except BufferError:
            break
        except Exception as e:  # a fatal error surfaces here too
            fatal.append(str(e))
            emit({"fatal": str(e)})
    producer.poll(0.02)

unflushed = producer.flush(60) if not fatal else len(producer)
emit({"done": {"produced": produced, "unflushed": unflushed}})
