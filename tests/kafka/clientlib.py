"""What the Python client drivers (confluent_client.py, kafka_python_client.py) share.

A record is one JSON line:
  {"partition": 0, "offset": 7, "key": "k" | null, "value": "v", "headers": {"name": "value"}}
produce reads records from stdin (partition optional: the client's partitioner
picks one without it; offset ignored) and prints {"partition", "offset"} per
record in input order. consume and group print the records they read, in the
order they read them.
"""

import json
import sys
import time

# Every step gives up after this long; the Rust test's own timeout is longer.
DEADLINE_S = 30
# After the wanted count, keep polling this long: extra records (duplicates,
# records a group should not have seen again) are printed too and fail the test.
LINGER_S = 1.0


def parse_args(argv):
    usage = "usage: produce BOOTSTRAP TOPIC [--idempotent] | consume BOOTSTRAP TOPIC COUNT | group BOOTSTRAP TOPIC COUNT GROUP"
    if len(argv) < 3:
        fail(usage)
    mode, bootstrap, topic, rest = argv[0], argv[1], argv[2], argv[3:]
    if mode == "produce" and rest in ([], ["--idempotent"]):
        return mode, (bootstrap, topic, rest == ["--idempotent"])
    if mode == "consume" and len(rest) == 1:
        return mode, (bootstrap, topic, int(rest[0]))
    if mode == "group" and len(rest) == 2:
        return mode, (bootstrap, topic, int(rest[0]), rest[1])
    fail(usage)


def inputs():
    return [json.loads(line) for line in sys.stdin if line.strip()]


def emit(obj):
    print(json.dumps(obj), flush=True)


def fail(why):
    sys.exit(why)


class Reader:
    """Calls poll() (returning a list of records) until `count` arrived or the deadline."""

    def __init__(self, poll):
        self.poll = poll

    def read(self, count):
        got = []
        deadline = time.monotonic() + DEADLINE_S
        while len(got) < count and time.monotonic() < deadline:
            got.extend(self.poll())
        linger = time.monotonic() + LINGER_S
        while time.monotonic() < linger:
            got.extend(self.poll())
        return got
