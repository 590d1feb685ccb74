"""Consumer group membership with kafka-python (commits and resuming are
covered by kafka_python_client.py's group mode).

Usage: kafka_python_groups.py BOOTSTRAP TOPIC GROUP

Two consumers in GROUP share a 2-partition topic one partition each; after
one closes (leaves), the other is assigned both. ListGroups and
DescribeGroups are asked in between.
Prints one JSON line; exits non-zero on a mismatch.
"""

import json
import sys
import threading
import time

from kafka import KafkaAdminClient, KafkaConsumer


def consumer(bootstrap, topic, group):
    return KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        consumer_timeout_ms=8000,
    )


class Member(threading.Thread):
    """Polls one consumer in its own thread, publishing its assignment."""

    def __init__(self, bootstrap, topic, group):
        super().__init__(daemon=True)
        self.args = (bootstrap, topic, group)
        self.assignment = []
        self.stop = threading.Event()

    def run(self):
        c = consumer(*self.args)
        while not self.stop.is_set():
            c.poll(timeout_ms=200)
            self.assignment = sorted(tp.partition for tp in c.assignment())
        c.close()


def wait(cond):
    deadline = time.time() + 40
    while time.time() < deadline and not cond():
        time.sleep(0.1)
    return cond()


def split(bootstrap, topic, group):
    a = Member(bootstrap, topic, group)
    a.start()
    wait(lambda: a.assignment == [0, 1])
    b = Member(bootstrap, topic, group)
    b.start()
    wait(lambda: len(a.assignment) == 1 and len(b.assignment) == 1)
    pa, pb = a.assignment, b.assignment
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    listed = [g["group_id"] for g in admin.list_groups()]
    described = admin.describe_groups([group])[group]
    members = len(described["members"])
    state = described["group_state"]
    admin.close()
    b.stop.set()
    b.join()
    wait(lambda: a.assignment == [0, 1])
    after = a.assignment
    a.stop.set()
    a.join()
    if sorted(pa + pb) != [0, 1] or len(pa) != 1 or after != [0, 1]:
        sys.exit(f"a {pa}, b {pb}, after {after}")
    print(json.dumps({"a": pa, "b": pb, "after": after, "listed": listed, "members": members, "state": state}))


if __name__ == "__main__":
    split(*sys.argv[1:4])
