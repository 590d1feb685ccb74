#!/usr/bin/env python3
"""Write the frontier of scripts/bench-frontier.sh into docs/benchmarks.md.

    bench-frontier-report.py --results docs/bench-frontier.jsonl \
        --doc docs/benchmarks.md --svg docs/bench-frontier.svg --commit C

Replaces the text between `<!-- frontier:start -->` and
`<!-- frontier:end -->` with one table per store (rows: budget x offered
rate; columns: achieved rate, WAL and data PUTs per GiB, ack p50/p99,
request dollars per GiB on S3 Standard) and draws PUTs per GiB against ack
p99 as an SVG (log-log, one marker per point, one colour per budget).
"""
import argparse
import json
import math

START, END = "<!-- frontier:start -->", "<!-- frontier:end -->"
MODEL_NAMES = {
    "none": "S3 test server (radosgw) as it is",
    "s3-standard": "S3 test server behind the S3-Standard-like latency model",
    "s3-express": "S3 test server behind the S3-Express-like latency model",
}
COLOURS = {"off": "#d62728", "4": "#1f77b4", "1": "#2ca02c"}


def budget_name(b):
    return "none" if b == "off" else f"{b} PUT/s"


def puts(r):
    c = r.get("cost") or {}
    return c.get("wal_puts_per_gib", 0.0), c.get("data_puts_per_gib", 0.0)


def table(rows):
    out = [
        "| budget | offered MiB/s | achieved MiB/s | WAL PUTs/GiB | data PUTs/GiB | ack p50 ms | ack p99 ms | S3 Standard $/GiB (requests) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        wal, data = puts(r)
        dollars = (r.get("cost") or {}).get("dollars_per_gib", {})
        std = next((v for k, v in dollars.items() if "Standard" in k or "standard" in k), None)
        out.append(
            f"| {budget_name(r['budget'])} | {r['offered_mib_per_sec']} | {r['mib_per_sec']:.1f} | "
            f"{wal:,.0f} | {data:,.0f} | {r['latency_ms']['p50']:.1f} | {r['latency_ms']['p99']:.1f} | "
            + (f"{std:.4f}" if std is not None else "–")
            + " |"
        )
    return "\n".join(out)


def svg(results):
    w, h, m = 720, 420, 60
    pts = [(puts(r)[0] + puts(r)[1], r["latency_ms"]["p99"], r) for r in results]
    pts = [p for p in pts if p[0] > 0 and p[1] > 0]
    if not pts:
        return "<svg xmlns='http://www.w3.org/2000/svg'/>"
    xs = [math.log10(p[0]) for p in pts]
    ys = [math.log10(p[1]) for p in pts]
    x0, x1 = math.floor(min(xs)), math.ceil(max(xs))
    y0, y1 = math.floor(min(ys)), math.ceil(max(ys))
    x1 = max(x1, x0 + 1)
    y1 = max(y1, y0 + 1)

    def sx(v):
        return m + (math.log10(v) - x0) / (x1 - x0) * (w - 2 * m)

    def sy(v):
        return h - m - (math.log10(v) - y0) / (y1 - y0) * (h - 2 * m)

    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' font-family='sans-serif' font-size='11'>",
        f"<rect width='{w}' height='{h}' fill='white'/>",
        f"<line x1='{m}' y1='{h - m}' x2='{w - m}' y2='{h - m}' stroke='black'/>",
        f"<line x1='{m}' y1='{m}' x2='{m}' y2='{h - m}' stroke='black'/>",
        f"<text x='{w / 2}' y='{h - 15}' text-anchor='middle'>WAL + data PUTs per GiB written (log)</text>",
        f"<text x='15' y='{h / 2}' transform='rotate(-90 15 {h / 2})' text-anchor='middle'>ack p99, ms (log)</text>",
    ]
    for d in range(x0, x1 + 1):
        x = sx(10**d)
        parts.append(f"<text x='{x}' y='{h - m + 15}' text-anchor='middle'>{10**d:,}</text>")
    for d in range(y0, y1 + 1):
        y = sy(10**d)
        parts.append(f"<text x='{m - 5}' y='{y + 4}' text-anchor='end'>{10**d:g}</text>")
    for x, y, r in pts:
        colour = COLOURS.get(r["budget"], "#7f7f7f")
        shape = "circle" if r["model"] == "none" else "rect"
        cx, cy = sx(x), sy(y)
        if shape == "circle":
            parts.append(f"<circle cx='{cx:.1f}' cy='{cy:.1f}' r='5' fill='{colour}'/>")
        else:
            parts.append(f"<rect x='{cx - 5:.1f}' y='{cy - 5:.1f}' width='10' height='10' fill='{colour}'/>")
        parts.append(f"<text x='{cx + 7:.1f}' y='{cy + 4:.1f}'>{r['offered_mib_per_sec']}</text>")
    ly = m
    for b, colour in COLOURS.items():
        parts.append(f"<circle cx='{w - m - 130}' cy='{ly}' r='5' fill='{colour}'/>")
        parts.append(f"<text x='{w - m - 120}' y='{ly + 4}'>budget {budget_name(b)}</text>")
        ly += 16
    parts.append(f"<circle cx='{w - m - 130}' cy='{ly}' r='5' fill='none' stroke='black'/>")
    parts.append(f"<text x='{w - m - 120}' y='{ly + 4}'>radosgw as it is</text>")
    ly += 16
    parts.append(f"<rect x='{w - m - 135}' y='{ly - 5}' width='10' height='10' fill='none' stroke='black'/>")
    parts.append(f"<text x='{w - m - 120}' y='{ly + 4}'>S3-Standard-like model</text>")
    parts.append(f"<text x='{m}' y='{m - 20}'>labels: offered MiB/s</text>")
    parts.append("</svg>")
    return "\n".join(parts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--results", required=True)
    ap.add_argument("--doc", required=True)
    ap.add_argument("--svg", required=True)
    ap.add_argument("--commit", default="unknown")
    a = ap.parse_args()
    results = [json.loads(l) for l in open(a.results) if l.strip()]
    sections = [
        f"Generated by `scripts/bench-frontier.sh` (commit {a.commit}) from "
        f"`docs/bench-frontier.jsonl`: 16 Kafka producers, 1 KiB records, acks=all, "
        f"linger 5 ms, 16 partitions, {results[0]['duration_sec']:.0f} s per point, a fresh node each.",
        "",
        "![PUTs per GiB against ack p99](bench-frontier.svg)",
    ]
    for model in dict.fromkeys(r["model"] for r in results):
        rows = [r for r in results if r["model"] == model]
        sections += ["", f"**{MODEL_NAMES.get(model, model)}**", "", table(rows)]
    body = "\n".join(sections)
    doc = open(a.doc).read()
    if START in doc and END in doc:
        head, rest = doc.split(START, 1)
        _, tail = rest.split(END, 1)
        doc = f"{head}{START}\n{body}\n{END}{tail}"
    else:
        doc = doc.rstrip("\n") + f"\n\n## The WAL PUT budget: latency against cost\n\n{START}\n{body}\n{END}\n"
    open(a.doc, "w").write(doc)
    open(a.svg, "w").write(svg(results))


if __name__ == "__main__":
    main()
