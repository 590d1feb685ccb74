#!/usr/bin/env python3
"""The cost of strong reads: one node, one partition of 100 records, and
1,000 sequential HTTP reads of its last 10 records, alternately with
consistency=local and consistency=strong (two rounds each), over one
keep-alive connection. Prints p50 and p99 in milliseconds per round.

    scripts/bench-strong-reads.py PORT [serve flags...]

Uses target/release/sluice (build it first). The serve flags choose the
stores, e.g. --metadata dynamodb://T --dynamodb-endpoint URL (after
`sluice init` with the same flags) or --metadata s3://bucket/prefix.
"""
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    port = int(sys.argv[1])
    data = tempfile.mkdtemp(prefix="sluice-strong-")
    node = subprocess.Popen(
        [os.path.join(ROOT, "target/release/sluice"), "serve", "--data-dir", data,
         "--http-addr", f"127.0.0.1:{port}", "--kafka-addr", "127.0.0.1:0"] + sys.argv[2:],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(data, "log"), "w"))
    try:
        conn = ready(port)

        def call(method, path, body=None):
            conn.request(method, path, body=json.dumps(body) if body else None,
                         headers={"content-type": "application/json"})
            r = conn.getresponse()
            return r.status, r.read()

        assert call("POST", "/v1/topics", {"name": "t", "partitions": 1})[0] == 201
        for i in range(100):
            while call("POST", "/v1/topics/t/partitions/0/records", {"records": [{"value": f"v{i}"}]})[0] != 200:
                time.sleep(0.1)
        out = {}
        for mode in ["local", "strong"] * 2:
            lat = []
            for _ in range(1000):
                t = time.perf_counter()
                status, body = call("GET", f"/v1/topics/t/partitions/0/records?offset=90&limit=10&consistency={mode}")
                lat.append((time.perf_counter() - t) * 1000)
                assert status == 200, body
            lat.sort()
            out.setdefault(mode, []).append({"p50_ms": round(lat[500], 3), "p99_ms": round(lat[990], 3)})
        print(json.dumps(out))
    finally:
        node.terminate()
        node.wait()


def ready(port):
    for _ in range(300):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            c.request("GET", "/ready")
            r = c.getresponse()
            r.read()
            if r.status == 200:
                return http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        except OSError:
            pass
        time.sleep(0.2)
    sys.exit("the node did not become ready")


if __name__ == "__main__":
    main()
