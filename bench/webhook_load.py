"""Load test of the admission webhook: Pod CREATE mutations over HTTPS with keep-alive, on loopback.

Starts the loopback API server (seeded like the HTTPS tests), the real `phalanx webhook`, and a trivial
Flask handler served by the same gunicorn settings (`webhook.server.serve`, gthread, TLS), then measures
both in the same run:

- closed loop: every connection sends its next request as soon as the previous answer arrives, for the
  throughput ceiling (req/s) and its latency;
- open loop at a fixed rate (default 500 req/s): requests are due on a schedule and latency is counted from
  the due time, so a stalled server cannot hide its queueing (no coordinated omission).

The load generator runs in separate processes (threads + `http.client`, one kept-alive connection per
thread), so its Python work does not share a GIL with the servers; it does share the two cores.

    .venv/bin/python bench/webhook_load.py [--duration 5] [--rounds 4] [--rate 500] [--processes 2] [--threads 4]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from http.client import HTTPSConnection
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.apiserver.server import ApiServer  # noqa: E402
from tests.webhook.harness import Webhook, fixture, free_port, seed, start_webhook, write_certificates  # noqa: E402


def serve_trivial(port: int, cert_file: str, key_file: str, workers: int, threads: int) -> int:
    """The least a correct webhook does (parse the review, echo its uid, allow), on the same server settings."""
    from flask import Flask, Response, request

    from webhook.server import ServerOptions, prepare_metrics_dir, serve

    def factory() -> Flask:
        app = Flask("trivial")

        @app.post("/mutate")
        def mutate() -> Response:
            uid = json.loads(request.get_data())["request"]["uid"]
            response = {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": {"uid": uid, "allowed": True},
            }
            return Response(json.dumps(response, separators=(",", ":")), mimetype="application/json")

        @app.get("/readyz")
        def readyz() -> Response:
            return Response(b"{}", mimetype="application/json")

        return app

    options = ServerOptions(f"127.0.0.1:{port}", cert_file, key_file, workers=workers, threads=threads)
    return serve(options, factory, prepare_metrics_dir())


def pod_review() -> bytes:
    """A recorded Pod CREATE of a pod-group member, ungated and for the default scheduler: it gets a patch."""
    review = fixture("admission/pod-create-mutating.json")
    spec = review["request"]["object"]["spec"]
    spec.pop("schedulingGates")
    spec["schedulerName"] = "default-scheduler"
    return json.dumps(review).encode()


def _drive(port: int, ca_file: str, body: bytes, seconds: float, interval: float | None, threads: int) -> list[float]:
    """One load process: `threads` kept-alive connections; `interval` None = closed loop, else each thread's pace."""
    context = ssl.create_default_context(cafile=ca_file)
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    start = time.perf_counter() + 0.2

    def worker(offset: float) -> None:
        conn = HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
        mine: list[float] = []
        headers = {"Content-Type": "application/json"}
        due = start + offset
        while True:
            now = time.perf_counter()
            if now - start >= seconds:
                break
            if interval is not None and due > now:
                time.sleep(due - now)
            sent = due if interval is not None else time.perf_counter()
            try:
                conn.request("POST", "/mutate?timeout=5s", body=body, headers=headers)
                response = conn.getresponse()
                payload = response.read()
                if response.status != 200 or b'"allowed":true' not in payload:
                    errors.append(f"{response.status}: {payload[:200]!r}")
            except OSError as err:
                errors.append(repr(err))
                conn.close()
                conn = HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
            mine.append(time.perf_counter() - sent)
            if interval is not None:
                due += interval
        conn.close()
        with lock:
            latencies.extend(mine)

    pool = [
        threading.Thread(target=worker, args=((i * interval / threads) if interval else 0.0,)) for i in range(threads)
    ]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    if errors:
        raise RuntimeError(f"{len(errors)} failed requests, first: {errors[0]}")
    return latencies


def server_cpu_seconds(pid: int) -> float:
    """User+system CPU of a gunicorn master and its workers, from /proc: stable when neighbours steal the cores."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if stat.parent.name == str(pid) or fields[1] == str(pid):  # fields[1] is the parent pid
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / ticks


@dataclass(frozen=True, slots=True)
class Result:
    latencies: tuple[float, ...]
    seconds: float
    cpu_seconds: float = 0.0

    @property
    def cpu_ms_per_request(self) -> float:
        return self.cpu_seconds / len(self.latencies) * 1000

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.seconds

    def quantile_ms(self, q: int) -> float:
        return statistics.quantiles(self.latencies, n=100, method="inclusive")[q - 1] * 1000


def summary(rounds: list[Result]) -> list[str]:
    """Median over rounds of req/s, p50 and p99: one round stalled by a neighbour does not decide."""
    return [
        f"{statistics.median(r.rate for r in rounds):.0f}",
        f"{statistics.median(r.quantile_ms(50) for r in rounds):.2f}",
        f"{statistics.median(r.quantile_ms(99) for r in rounds):.2f}",
        f"{statistics.median(r.cpu_ms_per_request for r in rounds):.3f}",
    ]


def measure(
    port: int, ca_file: Path, body: bytes, seconds: float, rate: float | None, processes: int, threads: int
) -> Result:
    interval = (processes * threads / rate) if rate else None
    with ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(_drive, port, str(ca_file), body, seconds, interval, threads) for _ in range(processes)]
        latencies = tuple(sorted(x for f in futures for x in f.result()))
    return Result(latencies, seconds)


def start_trivial(directory: Path, workers: int, threads: int) -> Webhook:
    ca_file, cert_file, key_file = write_certificates(directory)
    port = free_port()
    log_file = directory / "trivial.log"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    command = [
        sys.executable,
        __file__,
        "--serve-trivial",
        str(port),
        str(cert_file),
        str(key_file),
        str(workers),
        str(threads),
    ]
    with log_file.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env=env)
    hook = Webhook(process, port, ca_file, cert_file, key_file, log_file)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if hook.fresh_request("GET", "/readyz") == 200:
                return hook
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(log_file.read_text())


def main(argv: list[str]) -> int:
    if argv[:1] == ["--serve-trivial"]:
        port, cert, key, workers, threads = argv[1:6]
        return serve_trivial(int(port), cert, key, int(workers), int(threads))
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds per measurement")
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds per server and mode")
    parser.add_argument("--rate", type=float, default=500.0, help="open-loop request rate")
    parser.add_argument("--processes", type=int, default=2, help="load generator processes")
    parser.add_argument("--threads", type=int, default=4, help="connections per load process")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers of both servers")
    parser.add_argument("--server-threads", type=int, default=8, help="gunicorn threads per worker")
    args = parser.parse_args(argv)

    body = pod_review()
    api = ApiServer().start()
    seed(api)
    results: dict[str, dict[str, list[Result]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "webhook").mkdir()
        (root / "trivial").mkdir()
        extra = ("--threads", str(args.server_threads), "--log-level", "warning")
        servers = {
            "phalanx webhook": start_webhook(
                root / "webhook", api.kubeconfig(root / "kubeconfig"), args.workers, extra
            ),
            "trivial Flask handler": start_trivial(root / "trivial", args.workers, args.server_threads),
        }
        try:
            names = list(servers)
            for name in names:
                measure(servers[name].port, servers[name].ca_file, body, 1.0, None, args.processes, args.threads)
            # Rounds in A B B A order: background load on a shared machine drifts, and both servers should
            # see the same drift; results pool the rounds.
            for round_ in range(args.rounds):
                for name in names if round_ % 2 == 0 else names[::-1]:
                    server = servers[name]
                    for mode, rate in (("closed", None), ("open", args.rate)):
                        cpu_before = server_cpu_seconds(server.process.pid)
                        result = measure(
                            server.port, server.ca_file, body, args.duration, rate, args.processes, args.threads
                        )
                        cpu = server_cpu_seconds(server.process.pid) - cpu_before
                        result = Result(result.latencies, result.seconds, cpu)
                        results.setdefault(name, {}).setdefault(mode, []).append(result)
        finally:
            for server in servers.values():
                server.process.send_signal(signal.SIGTERM)
                server.process.wait(timeout=15)
            api.stop()

    conns = args.processes * args.threads
    print(
        f"closed loop: {conns} connections; open loop: {args.rate:.0f} req/s offered;"
        f" {args.rounds} alternating rounds of {args.duration:.0f} s per server and mode"
    )
    print(
        "| server | closed req/s | closed p50 ms | closed p99 ms | closed CPU ms/req"
        " | open req/s | open p50 ms | open p99 ms | open CPU ms/req |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, modes in results.items():
        print(f"| {name} | " + " | ".join(summary(modes["closed"]) + summary(modes["open"])) + " |")
    print("\nper round (req/s, p99 ms):")
    for name, modes in results.items():
        for mode, rounds in modes.items():
            print(f"  {name}, {mode}: " + ", ".join(f"{r.rate:.0f}/{r.quantile_ms(99):.1f}" for r in rounds))
    ours, trivial = (statistics.median(r.rate for r in results[n]["closed"]) for n in names)
    print(f"\nthroughput ratio webhook / trivial (medians): {ours / trivial:.2f}")
    ours_cpu, trivial_cpu = (statistics.median(r.cpu_ms_per_request for r in results[n]["closed"]) for n in names)
    print(f"server CPU per request, trivial / webhook (capacity ratio when CPU-bound): {trivial_cpu / ours_cpu:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
