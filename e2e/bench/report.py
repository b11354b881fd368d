"""Tables for make bench-server: plain text for the terminal, Markdown for
docs/benchmarks.md, with the ratios the goals are stated in."""

from __future__ import annotations

from pathlib import Path

SECTION = "## sluice-server vs Zaqar 23.0.1"

# (row label, cell, field, unit, goal kind, goal value)
#   goal "x>=": sluice/Zaqar >= value; "x<=": sluice/Zaqar <= value;
#   "abs<=": sluice's own value <= value, in the row's unit. The goals are
#   the server's performance goals (POST and claim+delete >= 25x Zaqar, POST at 4 conns p50
#   <= 0.3 ms and p99 <= 1.5 ms, Redis memory per stored 1 KiB message
#   <= 1.3 KiB, RSS <= 16 MB idle and <= 40 MB loaded).
ROWS = [
    ("POST 1 KiB, 32 conns: throughput", "post-32", "rps", "req/s", "x>=", 25),
    ("POST 1 KiB, 32 conns: p99", "post-32", "p99_us", "ms", None, None),
    ("POST 1 KiB, 4 conns: median", "post-4", "p50_us", "ms", "abs<=", 0.3),
    ("POST 1 KiB, 4 conns: p99", "post-4", "p99_us", "ms", "abs<=", 1.5),
    ("claim+delete, 32 conns: cycles", "claim-32", "cycles", "msg/s", "x>=", 25),
    ("claim+delete, 32 conns: requests", "claim-32", "rps", "req/s", None, None),
    ("claim+delete, 32 conns: p99", "claim-32", "p99_us", "ms", None, None),
    ("claim+delete, 4 conns: median", "claim-4", "p50_us", "ms", "x<=", 0.2),
    ("claim+delete, 4 conns: p99", "claim-4", "p99_us", "ms", "x<=", 0.5),
    ("Redis memory per stored message, 32 conns", "post-32", "bytes_per_msg", "bytes", "abs<=", 1331),
    ("RSS idle", None, "idle_rss_kib", "MB", "abs<=", 16),
    ("RSS under load (peak)", None, "load_rss_kib", "MB", "abs<=", 40),
    ("errors, all rounds (socket + non-2xx)", None, "errors", "", None, None),
]


def value(target: dict, cell: str | None, fld: str) -> float | None:
    if cell is None:
        if fld == "errors":
            return target["errors_total"]
        return target[fld] / 1024  # KiB -> MB (MiB)
    res = target["cells"].get(cell)
    if not res:
        return None
    if fld == "cycles":
        return res["claimed"] / (res["duration_us"] / 1e6)
    if res.get("dry") and fld in ("rps", "p50_us", "p99_us"):
        return None  # measured empty claims, not the cycle
    if fld.endswith("_us"):
        return res[fld] / 1000
    return res.get(fld)  # None: a field older runs did not record


def fmt(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    if unit in ("req/s", "msg/s", "bytes", ""):
        return f"{v:,.0f}"
    return f"{v:.2f}" if v < 100 else f"{v:,.0f}"


def pick(results: dict) -> tuple[str | None, str | None, str | None]:
    names = list(results["targets"])
    sluice = next((n for n in names if n.startswith("sluice")), None)
    zaqar = "zaqar" if "zaqar" in names else None
    noop = "noop" if "noop" in names else None
    return sluice, zaqar, noop


def table(results: dict) -> tuple[list[str], list[list[str]]]:
    targets = results["targets"]
    sluice, zaqar, noop = pick(results)
    head = ["metric", *(targets[n]["label"] for n in targets), "sluice ÷ Zaqar", "goal", "met"]
    rows = []
    for label, cell, fld, unit, kind, goal in ROWS:
        vals = {n: value(t, cell, fld) for n, t in targets.items()}
        s, z = vals.get(sluice), vals.get(zaqar)
        ratio = s / z if s is not None and z else None
        met, goal_txt = "", ""
        if kind == "x>=":
            goal_txt = f">= {goal}x"
            met = "" if ratio is None else ("yes" if ratio >= goal else "NO")
        elif kind == "x<=":
            goal_txt = f"<= {goal}x"
            met = "" if ratio is None else ("yes" if ratio <= goal else "NO")
        elif kind == "abs<=":
            goal_txt = f"<= {goal} {unit}"
            met = "" if s is None else ("yes" if s <= goal else "NO")
        unit_txt = f" ({unit})" if unit else ""
        rows.append([label + unit_txt, *(fmt(vals[n], unit) for n in targets),
                     "-" if ratio is None else f"{ratio:.2f}x", goal_txt, met])
    if sluice and noop:
        s = value(targets[sluice], "post-32", "rps")
        n = value(targets[noop], "post-32", "rps")
        frac = s / n if n else 0
        rows.append(["POST 32 conns as share of no-op HTTP", *("" for _ in targets),
                     f"{frac:.0%} of no-op", ">= 50%", "yes" if frac >= 0.5 else "NO"])
    return head, rows


def render_text(results: dict) -> str:
    head, rows = table(results)
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    line = lambda r: "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)  # noqa: E731
                               for i, (c, w) in enumerate(zip(r, widths)))
    return "\n".join([line(head), line(["-" * w for w in widths]), *map(line, rows)])


def load(results: dict, when: str) -> str:
    return "/".join(f"{x:.1f}" for x in results["loadavg"][when])


def add_server_gomaxprocs(ap) -> None:
    """The --server-gomaxprocs option of every benchmark that starts sluice-server."""
    ap.add_argument("--server-gomaxprocs", type=int, default=1,
                    help="GOMAXPROCS of sluice-server, as the operator deploys it (its default CPU "
                         "request, 100m, rounded up); 0: Go's own choice")


def gomaxprocs_words(results: dict) -> str:
    """How the run set sluice-server's GOMAXPROCS (runs before the option: Go's choice)."""
    n = results.get("server_gomaxprocs") or 0
    if n <= 0:
        return "Go's own GOMAXPROCS"
    return f"GOMAXPROCS={n}, as the operator deploys it (its CPU request rounded up; the chart's default is 100m)"


def render_markdown(results: dict) -> str:
    head, rows = table(results)
    out = [SECTION + " (`make bench-server`)", "",
           f"Command: `{results['command']}` (started {results['started']}).",
           f"Machine: {results['machine']}; {results.get('rounds', 1)} rounds, "
           "targets in alternating order, each cell's best round shown; "
           f"load average {load(results, 'start')} at the "
           f"start and {load(results, 'end')} at the end (other work shares this machine; "
           "a load far above 2 depresses every column). Every cell runs wrk for "
           f"{results['duration_s']:g} s with 2 threads on 127.0.0.1; messages are "
           f"{results['msg_size']} bytes of JSON each. The targets run one after "
           "another against one redis-server started by the benchmark (with the "
           "settings sluice gives its Redis shards, operator/sluice_operator/builders/"
           "shard_settings.py), so they never "
           "compete with each other for the 2 cores (wrk itself shares them).",
           "",
           "| " + " | ".join(head) + " |",
           "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    if results.get("failed_rounds"):
        out += ["", "Rounds that failed and were left out: "
                + "; ".join(results["failed_rounds"]) + "."]
    out += ["", "How to read it: throughput and latency are per HTTP request as wrk sees "
            "them (a claim+delete cycle is two requests; *cycles* counts messages "
            "claimed and deleted per second). Latency medians and p99s come from wrk's "
            "own histogram; this machine's scheduling jitter puts a floor of 2-3 ms "
            "under any p99. RSS is VmRSS from /proc (Zaqar: uwsgi master plus both "
            "workers, summed); idle is one second after start, under load is the "
            "largest 200 ms sample across all cells. Redis memory per stored message is "
            "the growth of the shared redis-server's `used_memory` over the POST cell "
            "at 32 connections, divided by the messages its queue then holds (each "
            "target has its own database; nothing expires during a cell). Zaqar 23.0.1 runs under uwsgi with "
            "2 processes, its Redis message store and an SQLite management store, with "
            "`--add-header \"Connection: close\"` (uwsgi's http-socket drops keep-alive "
            "connections otherwise), so every Zaqar request pays a TCP connect; that is "
            "how it can be served at all, and it is part of what is measured. "
            + f"sluice-server runs with {gomaxprocs_words(results)}. The no-op "
            "column is `e2e/bench/noop` (net/http, fixed 201, no storage): the HTTP "
            "ceiling of this machine. Raw numbers: `--json FILE`; "
            "`--render FILE` redraws this section from them.", "",
            "Scale: with the machine to itself, Zaqar 23.0.1 under the same uwsgi "
            "setup served about 940-995 POST req/s at 32 connections (p99 43 ms) "
            "and a median of 3.8 ms / p99 7 ms at 4 connections (1.4 KB messages, "
            "measured before this benchmark existed). Absolute numbers in a run "
            "taken at a high load average are far below that for every column; "
            "the ratios compare targets measured under the same conditions, "
            "alternating, best round each.", ""]
    return "\n".join(out)


def write_doc_section(path: Path, body: str, section: str = SECTION) -> None:
    """Replace only this benchmark's section (up to the next '## ')."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    lines = text.splitlines(keepends=True)
    start = next((i for i, l in enumerate(lines) if l.startswith(section)), None)
    if start is None:
        path.write_text(text.rstrip("\n") + "\n\n" + body + "\n")
        return
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    path.write_text("".join(lines[:start]) + body + "\n" + "".join(lines[end:]))
