"""What the group-member drivers (member_*.py) share: the line protocol.

A member prints one JSON object per line on stdout, as things happen:
  {"event": "assigned", "partitions": [0, 2]}   partitions it now owns
  {"event": "revoked", "partitions": [0]}       partitions it gave up
  {"event": "record", "p": 0, "o": 17, "v": "m42"}
  {"event": "committed", "offsets": {"0": 18}}  a commit the coordinator accepted
                                                (next offset to read, per partition)
  {"event": "commit_failed", "error": "..."}
  {"event": "error", "error": "..."}            a client error it carried on after
  {"event": "closed"}
and reads commands on stdin, one per line:
  leave   commit what it read, leave the group cleanly, exit
  crash   exit at once: no commit, no LeaveGroup
A member commits, synchronously, what it has delivered after every poll that
returned records and before giving partitions up, so a clean leave or a
rebalance re-delivers nothing a member already printed.
"""

import json
import queue
import sys
import threading


def emit(obj):
    print(json.dumps(obj), flush=True)


def commands():
    """A queue of stdin lines, read by a daemon thread (EOF reads as 'leave')."""
    q = queue.Queue()

    def run():
        for line in sys.stdin:
            if line.strip():
                q.put(line.strip())
        q.put("leave")

    threading.Thread(target=run, daemon=True).start()
    return q


def next_command(q):
    try:
        return q.get_nowait()
    except queue.Empty:
        return None


def parse(argv):
    """BOOTSTRAP TOPIC GROUP [--instance ID] [--protocol classic|consumer] [--session-ms N]"""
    if len(argv) < 3:
        sys.exit(parse.__doc__)
    opts = {"bootstrap": argv[0], "topic": argv[1], "group": argv[2], "instance": None, "protocol": "classic", "session_ms": 10000}
    rest = argv[3:]
    while rest:
        flag, value, rest = rest[0], rest[1], rest[2:]
        key = {"--instance": "instance", "--protocol": "protocol", "--session-ms": "session_ms"}[flag]
        opts[key] = int(value) if key == "session_ms" else value
    return opts
