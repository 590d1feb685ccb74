#!/usr/bin/env python3
"""Kafka produce benchmark with confluent-kafka (librdkafka), acks=all.

    PYTHONPATH=.services/python scripts/bench-kafka.py --bootstrap 127.0.0.1:9092 \\
        [--http http://127.0.0.1:8080 --partitions 4] [--duration 10] [--rate 2000] [--json]

Two runs, each with its own producer (one connection per broker):
- unlimited: produce as fast as the client can for --duration seconds, then
  wait for every delivery report: throughput in records/s and MiB/s;
- steady: --rate records/s for --duration seconds.
Both report the ack latency of every record: from produce() to its delivery
report (the broker's acks=all answer, seen when poll() runs the callback),
as p50/p90/p99/p99.9/max. --mode picks one run; --mode txn is a third:
- txn: a transactional producer (transactional.id, so idempotent too) runs
  transactions of --txn-records records back to back for --duration
  seconds (begin, produce, commit_transaction): throughput of committed
  records, and the latency of each commit_transaction call. --linger-ms (default 5) is
librdkafka's batching delay, printed with the results.

With --http the topic is created over HTTP first (409 when it exists is
fine); otherwise it must exist (or is auto-created with one partition).
--server-pid reports the server's CPU use during each run (from /proc).
`scripts/services.sh install` installs confluent-kafka into .services/python,
which this script also finds by itself.
"""

import argparse
import functools
import json
import os
import resource
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".services", "python"))

from confluent_kafka import Producer, libversion  # noqa: E402


def args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bootstrap", required=True, help="host:port of one Kafka listener")
    p.add_argument("--topic", default="bench-kafka")
    p.add_argument("--http", help="create the topic through this HTTP base URL first")
    p.add_argument(
        "--kafka-create",
        action="store_true",
        help="create the topic with --partitions through Kafka CreateTopics first (any broker)",
    )
    p.add_argument("--idempotent", action="store_true", help="enable.idempotence=true (default false)")
    p.add_argument("--partitions", type=int, default=4, help="partitions when --http creates the topic")
    p.add_argument("--duration", type=float, default=10.0, help="seconds per run")
    p.add_argument("--record-bytes", type=int, default=1024)
    p.add_argument("--rate", type=float, default=2000.0, help="records/s of the steady run")
    p.add_argument("--linger-ms", type=float, default=5.0)
    p.add_argument(
        "--queue-messages",
        type=int,
        default=100_000,
        help="librdkafka's local queue (queue.buffering.max.messages; its default): "
        "in the unlimited run, records wait here while the broker is behind",
    )
    p.add_argument("--mode", choices=["both", "unlimited", "steady", "txn"], default="both")
    p.add_argument("--txn-records", type=int, default=500, help="records per transaction (--mode txn)")
    p.add_argument("--server-pid", type=int, help="report this process's CPU use during each run")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout instead of text")
    return p.parse_args()


def create_topic(url, topic, partitions):
    body = json.dumps({"name": topic, "partitions": partitions}).encode()
    req = urllib.request.Request(
        f"{url}/v1/topics", data=body, headers={"content-type": "application/json"}, method="POST"
    )
    try:
        urllib.request.urlopen(req, timeout=10).read()
    except urllib.error.HTTPError as e:
        if e.code != 409:
            raise
    # Wait until every partition is open (placed on a node).
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        t = json.load(urllib.request.urlopen(f"{url}/v1/topics/{topic}", timeout=10))
        if all(p["state"] == "open" for p in t.get("partition_info", [])):
            return
        time.sleep(0.1)
    sys.exit(f"{topic}: partitions not open after 20 s")


def kafka_create_topic(bootstrap, topic, partitions):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for t, f in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).items():
        try:
            f.result(30)
        except Exception as e:  # an existing topic is fine
            if "TOPIC_ALREADY_EXISTS" not in str(e) and "already exists" not in str(e):
                raise
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=10).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions:
            if all(p.leader >= 0 for p in md.partitions.values()):
                return
        time.sleep(0.2)
    sys.exit(f"{topic}: {partitions} partitions with leaders not seen after 20 s")


def cpu_seconds(pid):
    """User + system CPU seconds of `pid` (None without one)."""
    if pid is None:
        return None
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu_seconds():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


class Run:
    """One producer, its delivery reports and their latencies."""

    def __init__(self, o, transactional=False):
        self.o = o
        config = {
            "bootstrap.servers": o.bootstrap,
            "acks": "all",
            "linger.ms": o.linger_ms,
            "compression.type": "none",
            "enable.idempotence": o.idempotent,
            "queue.buffering.max.messages": o.queue_messages,
            "message.timeout.ms": 60_000,
        }
        if transactional:
            config["transactional.id"] = f"bench-{os.getpid()}"
            del config["enable.idempotence"]
        self.producer = Producer(config)
        if transactional:
            self.producer.init_transactions(30)
        self.value = os.urandom(o.record_bytes)
        self.latencies = []
        self.errors = {}
        self.last_report = 0.0

    def report(self, sent, err, _msg):
        now = time.perf_counter()
        self.last_report = now
        if err is not None:
            self.errors[err.name()] = self.errors.get(err.name(), 0) + 1
        else:
            self.latencies.append(now - sent)

    def send(self):
        while True:
            try:
                self.producer.produce(
                    self.o.topic, value=self.value, on_delivery=functools.partial(self.report, time.perf_counter())
                )
                return
            except BufferError:
                # The local queue is full: serve delivery reports and retry.
                self.producer.poll(0.001)

    def warm_up(self, n=200):
        """Connections and metadata before anything is measured."""
        for _ in range(n):
            self.send()
        if self.producer.flush(30) != 0:
            sys.exit("warm-up: records not delivered in 30 s")
        self.latencies.clear()
        self.errors.clear()

    def measure_txn(self):
        """Transactions back to back; latency_ms is per commit_transaction."""
        o = self.o
        self.producer.begin_transaction()
        self.warm_up()
        self.producer.commit_transaction(30)
        self.latencies.clear()
        commits = []
        server0, own0 = cpu_seconds(o.server_pid), own_cpu_seconds()
        start = time.perf_counter()
        end = start + o.duration
        committed = 0
        while time.perf_counter() < end:
            self.producer.begin_transaction()
            for _ in range(o.txn_records):
                self.send()
            self.producer.poll(0)
            t = time.perf_counter()
            self.producer.commit_transaction(60)
            commits.append(time.perf_counter() - t)
            committed += o.txn_records
        elapsed = time.perf_counter() - start
        server1, own1 = cpu_seconds(o.server_pid), own_cpu_seconds()
        r = {
            "mode": "txn",
            "txn_records": o.txn_records,
            "transactions": len(commits),
            "sent": committed,
            "acked": committed,
            "errors": dict(self.errors),
            # A commit returns once every record of its transaction is
            # delivered; what is still queued here was never sent.
            "undelivered": len(self.producer),
            "send_seconds": round(elapsed, 3),
            "elapsed_seconds": round(elapsed, 3),
            "records_per_sec": round(committed / elapsed, 1),
            "mib_per_sec": round(committed * o.record_bytes / elapsed / 2**20, 2),
            "latency_ms": percentiles(commits),
            "record_latency_ms": percentiles(self.latencies),
            "client_cpu_percent": round(100 * (own1 - own0) / elapsed, 1),
        }
        if server0 is not None:
            r["server_cpu_percent"] = round(100 * (server1 - server0) / elapsed, 1)
        return r

    def measure(self, mode):
        o = self.o
        self.warm_up()
        server0, own0 = cpu_seconds(o.server_pid), own_cpu_seconds()
        start = time.perf_counter()
        end = start + o.duration
        sent = 0
        if mode == "unlimited":
            while time.perf_counter() < end:
                for _ in range(100):
                    self.send()
                sent += 100
                self.producer.poll(0)
        else:
            interval = 1.0 / o.rate
            while True:
                now = time.perf_counter()
                if now >= end:
                    break
                due = int((now - start) / interval) + 1
                while sent < due:
                    self.send()
                    sent += 1
                # Serve reports until the next record is due. librdkafka's
                # poll timeout is in whole milliseconds (a shorter one spins),
                # so records go out in 1 ms ticks at most.
                self.producer.poll(max(0.001, start + sent * interval - time.perf_counter()))
        sending = time.perf_counter() - start
        left = self.producer.flush(60)
        elapsed = max(self.last_report, start + sending) - start
        server1, own1 = cpu_seconds(o.server_pid), own_cpu_seconds()
        acked = len(self.latencies)
        r = {
            "mode": mode,
            "sent": sent,
            "acked": acked,
            "errors": dict(self.errors),
            "undelivered": left,
            "send_seconds": round(sending, 3),
            "elapsed_seconds": round(elapsed, 3),
            "records_per_sec": round(acked / elapsed, 1),
            "mib_per_sec": round(acked * o.record_bytes / elapsed / 2**20, 2),
            "latency_ms": percentiles(self.latencies),
            "client_cpu_percent": round(100 * (own1 - own0) / elapsed, 1),
        }
        if mode == "steady":
            r["target_rate"] = o.rate
        if server0 is not None:
            r["server_cpu_percent"] = round(100 * (server1 - server0) / elapsed, 1)
        return r


def percentiles(samples):
    if not samples:
        return {}
    s = sorted(samples)

    def at(q):
        return round(1000 * s[min(len(s) - 1, int(q * len(s)))], 2)

    return {"p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "p99.9": at(0.999), "max": round(1000 * s[-1], 2)}


def line(r):
    lat = " ".join(f"{k} {v:.2f}" for k, v in r["latency_ms"].items())
    head = {"unlimited": "unlimited", "txn": f"txn of {r.get('txn_records')} records"}.get(
        r["mode"], f"steady {r.get('target_rate', 0):.0f}/s"
    )
    cpu = f"client CPU {r['client_cpu_percent']}%"
    if "server_cpu_percent" in r:
        cpu += f", server CPU {r['server_cpu_percent']}%"
    errors = f"{sum(r['errors'].values())} errors {r['errors']}" if r["errors"] else "0 errors"
    return (
        f"{head}: {r['acked']} records acked in {r['elapsed_seconds']:.1f}s = {r['records_per_sec']:.0f} records/s "
        f"({r['mib_per_sec']:.2f} MiB/s), {errors}, {r['undelivered']} undelivered; "
        f"{'commit_transaction' if r['mode'] == 'txn' else 'ack'} latency ms {lat}; {cpu}"
    )


def main():
    o = args()
    if o.http:
        create_topic(o.http.rstrip("/"), o.topic, o.partitions)
    if o.kafka_create:
        kafka_create_topic(o.bootstrap, o.topic, o.partitions)
    modes = ["unlimited", "steady"] if o.mode == "both" else [o.mode]
    results = [Run(o, True).measure_txn() if m == "txn" else Run(o).measure(m) for m in modes]

    settings = {
        "bootstrap": o.bootstrap,
        "topic": o.topic,
        "record_bytes": o.record_bytes,
        "acks": "all",
        "idempotent": o.idempotent,
        "linger_ms": o.linger_ms,
        "queue_messages": o.queue_messages,
        "compression": "none",
        "duration_sec": o.duration,
        "librdkafka": libversion()[0],
    }
    if o.json:
        print(json.dumps({"settings": settings, "results": results}))
        return
    print(
        f"confluent-kafka (librdkafka {settings['librdkafka']}) -> {o.bootstrap} topic {o.topic}: "
        f"{o.record_bytes} B records, acks=all, linger.ms={o.linger_ms:g}, "
        f"queue.buffering.max.messages={o.queue_messages}, compression none, {o.duration:g}s per run"
    )
    for r in results:
        print(line(r))


if __name__ == "__main__":
    main()
