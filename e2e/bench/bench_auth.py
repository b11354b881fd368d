"""make bench-auth: what Keystone authentication and TLS cost sluice-server.

Three sluice-servers on one Redis, started in the same run: plain HTTP
without authentication, plain HTTP with --auth keystone against the real
Keystone (e2e/keystone), and HTTPS (--tls-cert-file) without
authentication. wrk POSTs one ~1 KiB message per request to each, at 32
connections (saturation) and 4, over keep-alive connections; the Keystone
token is validated once and then served from the server's token cache,
which is the steady state the goal is about (Keystone-on throughput >= 95 %
of off). Server-side cost is the server process's CPU time (utime+stime
from /proc) per request. The servers are measured in rotating order for
--rounds rounds and each cell's best round is kept, so a burst of load
from elsewhere on the machine lands on all sides alike. The load average
is printed with the table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "testsupport"))
sys.path.insert(0, str(HERE.parent / "keystone"))

from bench_server import machine, run_wrk  # noqa: E402
from harness import RedisServer, SluiceServer  # noqa: E402
from keystone_server import KeystoneServer  # noqa: E402
from report import write_doc_section  # noqa: E402

SECTION = "## Keystone authentication and TLS cost"
CELLS = [("post-32", 32), ("post-4", 4)]


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def self_signed(dir: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (wrk does not verify it)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "sluice-server")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now)
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .sign(key, hashes.SHA256()))
    crt, k = dir / "tls.crt", dir / "tls.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    k.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                    serialization.NoEncryption()))
    return crt, k


def warm_up(url: str, project: str, token: str) -> None:
    """One request, so the token is validated (slowly, on a busy machine)
    and cached before load starts: the cached case is what is measured."""
    req = urllib.request.Request(f"{url}/v2/queues", headers={
        "Client-ID": "3381af92-2b9e-11e3-b191-71861300734c", "X-Project-ID": project, "X-Auth-Token": token})
    with urllib.request.urlopen(req, timeout=120) as resp:
        if resp.status != 200:
            raise SystemExit(f"warm-up with the Keystone token: {resp.status}")


def cache_hit_ns() -> str:
    """The Go benchmark of the token cache's hit path (what Keystone auth adds
    to a request whose token is cached), median of 5 runs."""
    import subprocess

    out = subprocess.run(["go", "test", "-run", "^$", "-bench", "CachedHit", "-count", "5", "./internal/auth/"],
                         cwd=HERE.parents[1] / "server", capture_output=True, text=True, timeout=600).stdout
    ns = [float(line.split()[2]) for line in out.splitlines() if line.startswith("BenchmarkCachedHit")]
    return f"{statistics.median(ns):.0f} ns" if ns else "n/a"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--duration", type=float, default=10, help="seconds per cell")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--write-doc", type=Path, help="replace the section in this markdown file")
    args = ap.parse_args()
    load_before = loadavg()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    best: dict[str, dict[str, dict]] = {"off": {}, "keystone": {}, "tls": {}}
    rates: dict[str, dict[str, list[float]]] = {n: {c: [] for c, _ in CELLS} for n in best}
    with tempfile.TemporaryDirectory(prefix="bench-auth-") as tmp:
        work = Path(tmp)
        with RedisServer(work / "redis") as redis, KeystoneServer(work / "keystone") as ks:
            admin = ks.admin_token()
            ks.add_user(admin, "sluice", "sluice-pw", "service", "service")
            ks.add_user(admin, "bench", "bench-pw", "bench", "member")
            token, project = ks.issue("bench", "bench-pw", "bench")
            pw = work / "pw"
            pw.write_text("sluice-pw")
            crt, key = self_signed(work)
            servers = {
                "off": SluiceServer(work / "off", redis.url(1), extra_args=["--access-log=false"]),
                "keystone": SluiceServer(work / "ks", redis.url(2), extra_args=[
                    "--access-log=false", "--auth", "keystone", "--keystone-url", ks.url,
                    "--keystone-username", "sluice", "--keystone-project", "service",
                    "--keystone-password-file", str(pw), "--keystone-timeout", "60s"]),
                "tls": SluiceServer(work / "tls", redis.url(3), extra_args=[
                    "--access-log=false", "--tls-cert-file", str(crt), "--tls-key-file", str(key)]),
            }
            env = {"off": {"PROJECT": project}, "keystone": {"PROJECT": project, "AUTH_TOKEN": token},
                   "tls": {"PROJECT": project}}
            for name, s in servers.items():
                if name == "tls":
                    s.spawn()  # SluiceServer.start polls http://, which TLS does not answer
                    s.wait_port()
                else:
                    s.start()
            warm_up(servers["keystone"].url, project, token)
            urls = {n: s.url.replace("http://", "https://") if n == "tls" else s.url for n, s in servers.items()}
            try:
                for rnd in range(args.rounds):
                    names = list(servers)
                    order = names[rnd % len(names):] + names[:rnd % len(names)]
                    for name in order:
                        for cell, conns in CELLS:
                            e = dict(env[name], QUEUE=f"auth-{cell}-r{rnd}")
                            cpu0 = cpu_seconds(servers[name].pid)
                            r = run_wrk(urls[name], "post.lua", conns, args.duration, e)
                            r["cpu_us"] = (cpu_seconds(servers[name].pid) - cpu0) * 1e6 / max(r["requests"], 1)
                            print(f"round {rnd + 1} {name:8s} {cell:8s} {r['rps']:8.0f} req/s "
                                  f"p50 {r['p50_us'] / 1000:6.2f} ms cpu {r['cpu_us']:6.1f} us/req "
                                  f"errors {r['errors']}", flush=True)
                            if r["errors"]:
                                raise SystemExit(f"{name} {cell}: {r['errors']} failed requests")
                            rates[name][cell].append(r["rps"])
                            if cell not in best[name] or r["rps"] > best[name][cell]["rps"]:
                                best[name][cell] = r
            finally:
                for s in servers.values():
                    s.stop()
    lines = [SECTION + " (`make bench-auth`)", "",
             f"Command: `make bench-auth BENCH_ARGS=\"--duration {args.duration:g} --rounds {args.rounds}\"` "
             f"(started {started}).",
             f"Machine: {machine()}; load average {load_before} before, {loadavg()} after "
             "(the machine is shared: both sides ran interleaved in the same run).",
             "POST of one ~1 KiB message per request to sluice-server on Redis over keep-alive "
             "connections; Keystone = `--auth keystone` with a token validated once by the real "
             "Keystone 30.0.0 and then cached; TLS = HTTPS (ECDSA P-256, TLS 1.3), no auth. "
             "Best of the rounds per cell (median of the rounds in brackets: on a shared, loaded "
             "machine single rounds swing by 2x); CPU is the server process's CPU time per request "
             "in the best round.", "",
             "| cell | plain req/s | Keystone req/s | Keystone/plain | goal | TLS req/s | TLS/plain "
             "| CPU plain | CPU Keystone | CPU TLS |",
             "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    ok = True
    for cell, _ in CELLS:
        off, on, tls = best["off"][cell], best["keystone"][cell], best["tls"][cell]
        med = {n: statistics.median(rates[n][cell]) for n in rates}
        ratio = on["rps"] / off["rps"]
        ok = ok and ratio >= 0.95
        lines.append(f"| {cell} | {off['rps']:.0f} ({med['off']:.0f}) | {on['rps']:.0f} ({med['keystone']:.0f}) "
                     f"| {ratio * 100:.1f} % ({med['keystone'] / med['off'] * 100:.0f} %) | >= 95 % "
                     f"{'met' if ratio >= 0.95 else 'NOT met'} | {tls['rps']:.0f} ({med['tls']:.0f}) | "
                     f"{tls['rps'] / off['rps'] * 100:.1f} % ({med['tls'] / med['off'] * 100:.0f} %) | "
                     f"{off['cpu_us']:.0f} us | {on['cpu_us']:.0f} us | {tls['cpu_us']:.0f} us |")
    lines += ["", f"The token cache's hit path alone (`go test -bench CachedHit ./internal/auth/`, 2 goroutines): "
              f"{cache_hit_ns()} per request, against the server CPU per POST above."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write_doc:
        write_doc_section(args.write_doc, text, SECTION)
    return 0


if __name__ == "__main__":
    sys.exit(main())
