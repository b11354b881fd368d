"""Print a Benchmark's results as a table, or extract its report ConfigMap.

    results_table.py BENCHMARK.json            # kubectl get benchmark -o json
    results_table.py --extract CM.json OUTDIR  # kubectl get configmap -o json

Used by `make up`; standard library only, so it runs before any venv exists.
"""

from __future__ import annotations

import base64
import json
import os
import sys


def fmt(v: object, digits: int = 2) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    out = []
    for n, r in enumerate(rows):
        out.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))
        if n == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join("    " + line for line in out)


def results(path: str) -> None:
    with open(path) as f:
        bench = json.load(f)
    spec, status = bench.get("spec", {}), bench.get("status", {})
    res = status.get("results") or {}
    name = bench["metadata"]["name"]
    print(f"\n    Benchmark {name}: scenario {spec.get('scenario')}, phase {status.get('phase')}, "
          f"verdict {status.get('verdict', '-')}")
    rows = [["operation", "req/s", "ms/req", "p50 ms", "p99 ms", "p99.9 ms", "requests", "errors"]]
    for op, r in sorted((res.get("operations") or {}).items()):
        rows.append([op, fmt(r.get("requestsPerSecond"), 1), fmt(r.get("msPerRequest"), 3), fmt(r.get("p50Ms"), 3),
                     fmt(r.get("p99Ms"), 3), fmt(r.get("p999Ms"), 3), fmt(r.get("requests")), fmt(r.get("errors"))])
    rows.append(["all", fmt(res.get("requestsPerSecond"), 1), "-", "-", fmt(res.get("p99Ms"), 3), "-", "-", "-"])
    print(table(rows))
    print(f"\n    messages: produced {fmt(res.get('produced'))}, consumed {fmt(res.get('consumed'))}, "
          f"lost {fmt(res.get('lost'))}, duplicated {fmt(res.get('duplicated'))}")
    for reason in status.get("verdictReasons") or []:
        print(f"    verdict: {reason}")


def extract(path: str, outdir: str) -> None:
    with open(path) as f:
        cm = json.load(f)
    os.makedirs(outdir, exist_ok=True)
    for key, text in (cm.get("data") or {}).items():
        with open(os.path.join(outdir, key), "w") as f:
            f.write(text)
    for key, b64 in (cm.get("binaryData") or {}).items():
        with open(os.path.join(outdir, key), "wb") as f:
            f.write(base64.b64decode(b64))


def main(argv: list[str]) -> int:
    if len(argv) == 2:
        results(argv[1])
        return 0
    if len(argv) == 4 and argv[1] == "--extract":
        extract(argv[2], argv[3])
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
