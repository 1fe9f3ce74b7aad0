"""Load test of `vllm-triage serve`: real-sized logs, N clients at once, figures at the end.

    python benchmarks/load.py                                  # start a server, ~200 KB and ~2 MB logs
    python benchmarks/load.py --url http://127.0.0.1:8080 --log startup.log --concurrency 1,4,8
    python benchmarks/load.py --sizes 200KB --concurrency 1,2,4 --requests 40

Without --url it starts `python -m triage serve --port 0` on 127.0.0.1 and stops it at the
end. Without --log it builds logs of the --sizes by concatenating the fixture logs
(fixtures/logs/*/*.log) until the size is reached. Each client keeps one HTTP connection
and posts the log as text/plain; the run stops after --requests requests or --duration
seconds per (log, concurrency) pair, whichever comes first. It prints requests/s, p50/p99
latency and the answers that were not 200, by status. Only loopback URLs are accepted.
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import subprocess
import sys
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "logs"
UNITS = {"": 1, "B": 1, "KB": 1 << 10, "KIB": 1 << 10, "MB": 1 << 20, "MIB": 1 << 20}


def size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in UNITS:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 200KB, 2MB)")
    return int(float(m.group(1)) * UNITS[m.group(2).upper()])


def build_log(target: int) -> bytes:
    """The fixture logs, concatenated and repeated until `target` bytes, cut at a line end."""
    corpus = b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in sorted(FIXTURES.glob("*/*.log")))
    if not corpus:
        sys.exit(f"no fixture logs under {FIXTURES}")
    data = corpus * (target // len(corpus) + 1)
    return data[: data.rfind(b"\n", 0, target) + 1]


@dataclass
class Result:
    latencies: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, seconds: float, outcome: str) -> None:
        with self.lock:
            if outcome == "200":
                self.latencies.append(seconds)
            else:
                self.errors[outcome] = self.errors.get(outcome, 0) + 1


def client(
    host: str,
    port: int,
    path: str,
    body: bytes,
    headers: dict[str, str],
    budget: list[int],
    stop_at: float,
    result: Result,
    timeout: float,
) -> None:
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    while time.monotonic() < stop_at:
        with result.lock:
            if budget[0] <= 0:
                break
            budget[0] -= 1
        start = time.perf_counter()
        try:
            conn.request("POST", path, body=body, headers=headers)
            resp = conn.getresponse()
            resp.read()
            outcome = str(resp.status)
            if resp.getheader("connection", "").lower() == "close":
                conn.close()
        except (OSError, http.client.HTTPException) as exc:
            outcome = type(exc).__name__
            conn.close()
        result.add(time.perf_counter() - start, outcome)
    conn.close()


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def run_level(
    url: urllib.parse.SplitResult,
    body: bytes,
    concurrency: int,
    requests: int,
    duration: float,
    token: str | None,
    timeout: float,
) -> tuple[Result, float]:
    headers = {"Content-Type": "text/plain"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    path = (url.path.rstrip("/") or "") + "/v1/triage"
    result, budget = Result(), [requests]
    stop_at = time.monotonic() + duration
    threads = [
        threading.Thread(
            target=client, args=(url.hostname, url.port, path, body, headers, budget, stop_at, result, timeout)
        )
        for _ in range(concurrency)
    ]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return result, time.perf_counter() - start


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    cmd = [
        sys.executable,
        "-m",
        "triage",
        "serve",
        "--port",
        "0",
        "--no-access-log",
        "--max-concurrency",
        str(args.server_concurrency),
        "--timeout",
        str(args.server_timeout),
        "--max-bytes",
        str(args.server_max_bytes),
    ]
    env = {k: v for k, v in os.environ.items() if k != "VLLM_TRIAGE_TOKEN"}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep draining
            return proc, m.group(1)
    proc.kill()
    sys.exit("the server did not start: " + (proc.stderr.read() or "no output"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--url", help="a running server (loopback only); default: start one")
    p.add_argument("--log", action="append", default=[], help="a log file to post (repeatable)")
    p.add_argument("--sizes", default="200KB,2MB", help="generated log sizes when no --log (default 200KB,2MB)")
    p.add_argument("--concurrency", default="1,4,8", help="client counts to try (default 1,4,8)")
    p.add_argument("--requests", type=int, default=40, help="requests per level, at most (default 40)")
    p.add_argument("--duration", type=float, default=60, help="seconds per level, at most (default 60)")
    p.add_argument("--timeout", type=float, default=120, help="client socket timeout (default 120 s)")
    p.add_argument("--token", default=os.environ.get("VLLM_TRIAGE_TOKEN"), help="bearer token (env VLLM_TRIAGE_TOKEN)")
    p.add_argument("--server-concurrency", type=int, default=4, help="--max-concurrency of a started server")
    p.add_argument("--server-timeout", type=float, default=30, help="--timeout of a started server")
    p.add_argument("--server-max-bytes", default="20MiB", help="--max-bytes of a started server")
    args = p.parse_args(argv)
    levels = [int(x) for x in args.concurrency.split(",") if x.strip()]
    logs = [(Path(x).name, Path(x).read_bytes()) for x in args.log]
    logs = logs or [(f"generated {s.strip()}", build_log(size(s))) for s in args.sizes.split(",") if s.strip()]
    proc = None
    if args.url is None:
        proc, args.url = start_server(args)
    url = urllib.parse.urlsplit(args.url)
    if url.hostname not in ("127.0.0.1", "localhost", "::1") and not url.hostname.startswith("127."):
        sys.exit("load tests target this machine only: give a loopback --url")
    try:
        print(f"server {args.url}  cpus {os.cpu_count()}  python {sys.version.split()[0]}")
        print(
            f"{'log':<22}{'bytes':>10}{'conc':>6}{'ok':>6}{'errors':>18}{'req/s':>9}{'MB/s':>8}"
            f"{'p50 ms':>9}{'p99 ms':>9}"
        )
        for name, body in logs:
            for conc in levels:
                result, wall = run_level(url, body, conc, args.requests, args.duration, args.token, args.timeout)
                ok = len(result.latencies)
                errors = ",".join(f"{k}x{v}" for k, v in sorted(result.errors.items())) or "0"
                print(
                    f"{name:<22}{len(body):>10}{conc:>6}{ok:>6}{errors:>18}{ok / wall:>9.2f}"
                    f"{ok * len(body) / wall / 1e6:>8.2f}{percentile(result.latencies, 0.5) * 1e3:>9.0f}"
                    f"{percentile(result.latencies, 0.99) * 1e3:>9.0f}",
                    flush=True,
                )
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
