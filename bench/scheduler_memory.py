"""What the `phalanx scheduler` process's memory is, and what holds it, in a backlog drain on the real API server
(issue 23).

The drain of `bench/real_apiserver.py` (its control plane, nodes, pods and kubelet stand-in), for Phalanx alone:
`--nodes` nodes, `--pods` pending pods created before the scheduler starts, the scheduler started and stopped
once all are bound. Its resident size is sampled every 50 ms (VmRSS) with the moment the bench's watch saw the
first and the last Binding, so the report says whether the peak (VmHWM) came while the informers listed or
while it scheduled.

`--tracemalloc` runs the same process under tracemalloc (the CLI started from a small wrapper, nothing changed
in the scheduler): after the last Binding the wrapper writes the top allocation sites of what the process still
holds (by file and line, and by traceback) and tracemalloc's own peak of traced memory. tracemalloc slows the
process and adds its own bookkeeping to RSS: its figures say what holds the memory, the plain run says how much.

`--checkout DIR` runs `phalanx scheduler` from another checkout than this one (a copy of a commit, so edits made
while the bench runs do not count); `--before DIR` also runs it from a second one (an older commit) in the same
control plane, alternating (`--rounds`). `--env KEY=VALUE` sets a variable in the scheduler's environment (an
allocator setting such as MALLOC_ARENA_MAX, say).

    .venv/bin/python bench/scheduler_memory.py --nodes 5000 --pods 50000
    .venv/bin/python bench/scheduler_memory.py --nodes 1000 --pods 10000 --tracemalloc

Not part of `make test`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import real_apiserver as bench

WRAPPER = """
import os, sys, threading, time, tracemalloc
tracemalloc.start(int(os.environ["PHALANX_BENCH_FRAMES"]))
out = os.environ["PHALANX_BENCH_TRACE"]

def dump():
    while not os.path.exists(out + ".go"):
        time.sleep(0.2)
    snap = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap>")]
    )
    current, peak = tracemalloc.get_traced_memory()
    lines = [f"traced now {current / 2**20:.1f} MiB, traced peak {peak / 2**20:.1f} MiB", "", "by line:"]
    for stat in snap.statistics("lineno")[:15]:
        lines.append(f"{stat.size / 2**20:8.1f} MiB {stat.count:>9,} blocks  {stat.traceback[0]}")
    lines += ["", "by traceback (innermost last):"]
    for stat in snap.statistics("traceback")[:10]:
        lines.append(f"{stat.size / 2**20:8.1f} MiB {stat.count:>9,} blocks")
        lines += ["      " + str(frame) for frame in stat.traceback]
    with open(out, "w") as f:
        f.write("\\n".join(lines) + "\\n")

threading.Thread(target=dump, daemon=True).start()
from phalanx.cli import main
sys.exit(main())
"""


@dataclass
class Run:
    label: str
    checkout: str
    nodes: int
    pods: int
    seconds: float = 0.0
    pods_per_second: float = 0.0
    cpu_ms_per_pod: float = 0.0
    hwm_mib: float = 0.0
    rss_at_first_bind_mib: float = 0.0
    rss_peak_sampled_mib: float = 0.0
    peak_at_seconds: float = 0.0
    first_bind_seconds: float = 0.0
    rss_at_end_mib: float = 0.0
    trace: str = ""


class Sampler:
    """VmRSS of one process every 50 ms, on the bench's clock."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            try:
                text = Path(f"/proc/{self.pid}/status").read_text()
            except OSError:
                return
            for line in text.splitlines():
                if line.startswith("VmRSS:"):
                    self.samples.append((time.perf_counter(), int(line.split()[1]) / 1024))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def at(self, when: float) -> float:
        return next((rss for t, rss in reversed(self.samples) if t <= when), 0.0)


class Scheduler(bench.PhalanxBeforeRun):
    """`phalanx scheduler` from `checkout`, optionally under the tracemalloc wrapper, with extra environment."""

    name = "phalanx"
    extra_env: dict[str, str] = {}
    trace: Path | None = None
    frames = 1

    def command(self, plane: bench.ControlPlane) -> list[str]:
        cli = bench.PhalanxRun.command(self, plane)[1:]
        if self.trace is None:
            return [str(self.python), "-c", "import sys; from phalanx.cli import main; sys.exit(main())", *cli]
        return [str(self.python), "-c", WRAPPER, *cli]

    def env(self) -> dict[str, str]:
        env = {**super().env(), **self.extra_env}
        if self.trace is not None:
            env["PHALANX_BENCH_TRACE"] = str(self.trace)
            env["PHALANX_BENCH_FRAMES"] = str(self.frames)
        return env


def drain(plane: bench.ControlPlane, label: str, checkout: Path, nodes: int, pods: int, trace: Path | None) -> Run:
    namespace = bench.new_namespace(plane, label)
    plane.api.create_many(
        "/api/v1/namespaces/{ns}/pods",
        (bench.pod(f"p-{i}", namespace, bench.PHALANX_SCHEDULER, "100m", "128Mi") for i in range(pods)),
    )
    watch = bench.PodWatch(plane.api, namespace, bench.list_version(plane.api, namespace), start_pods=True)
    Scheduler.checkout = checkout
    Scheduler.trace = trace
    run = Scheduler(plane, label)
    sampler = Sampler(run.proc.pid)
    watch.wait(lambda: watch.bound >= 1, timeout=3600)
    first = time.perf_counter()
    done = watch.wait(lambda: watch.bound >= pods, timeout=3600)
    end = time.perf_counter()
    text = ""
    if trace is not None:
        trace.with_suffix(trace.suffix + ".go").touch()
        deadline = time.time() + 600
        while not trace.exists() and time.time() < deadline:
            time.sleep(0.5)
        text = trace.read_text() if trace.exists() else "(no tracemalloc dump)"
    cpu, hwm = run.stop()
    sampler.stop()
    watch.stop()
    for attempt in range(5):  # deleting 50,000 pods under load may outlast the server's patience: ask again
        try:
            bench.cleanup(plane, namespace)
            break
        except (OSError, http.client.HTTPException):
            if attempt == 4:
                raise
            time.sleep(5)
    if not done:
        raise RuntimeError(f"{label}: only {watch.bound} of {pods} bound")
    peak_t, peak = max(sampler.samples, key=lambda s: s[1], default=(run.started, 0.0))
    seconds = end - run.started
    return Run(
        label=label,
        checkout=str(checkout),
        nodes=nodes,
        pods=pods,
        seconds=round(seconds, 1),
        pods_per_second=round(pods / seconds, 1),
        cpu_ms_per_pod=round(1000 * cpu / pods, 3),
        hwm_mib=round(hwm, 1),
        rss_at_first_bind_mib=round(sampler.at(first), 1),
        rss_peak_sampled_mib=round(peak, 1),
        peak_at_seconds=round(peak_t - run.started, 1),
        first_bind_seconds=round(first - run.started, 1),
        rss_at_end_mib=round(sampler.at(end), 1),
        trace=text,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=1, help="runs of each checkout, alternating")
    parser.add_argument("--checkout", type=Path, default=bench.ROOT, help="run `phalanx scheduler` from here")
    parser.add_argument("--before", type=Path, help="also run this checkout (an older commit)")
    parser.add_argument("--tracemalloc", action="store_true", help="run under tracemalloc and print its top sites")
    parser.add_argument("--frames", type=int, default=1, help="tracemalloc frames kept per allocation")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the scheduler's environment")
    parser.add_argument("--json", type=Path, help="write every run here")
    args = parser.parse_args()
    Scheduler.extra_env = dict(item.split("=", 1) for item in args.env)
    Scheduler.frames = args.frames
    checkouts = [("p", args.checkout.resolve())] + ([("b", args.before.resolve())] if args.before else [])
    print(f"load before: {os.getloadavg()}", flush=True)
    plane = bench.ControlPlane(keep=False)
    runs: list[Run] = []
    traces = Path(tempfile.mkdtemp(prefix="phalanx-memory-"))
    try:
        plane.setup()
        plane.ensure_nodes(args.nodes)
        for r in range(args.rounds):
            for name, checkout in checkouts if r % 2 == 0 else checkouts[::-1]:
                label = f"memory-{name}{r}"
                trace = traces / f"{label}.txt" if args.tracemalloc else None
                run = drain(plane, label, checkout, args.nodes, args.pods, trace)
                runs.append(run)
                print(json.dumps({k: v for k, v in asdict(run).items() if k != "trace"}), flush=True)
                if run.trace:
                    print(run.trace, flush=True)
    finally:
        bench.stop_all(plane)
    print(f"load after: {os.getloadavg()}")
    print("| run | checkout | pods/s | CPU ms/pod | peak RSS (VmHWM) | RSS at first bind | peak at | RSS at end |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for run in runs:
        print(
            f"| {run.label} | {run.checkout} | {run.pods_per_second:.0f} | {run.cpu_ms_per_pod:.2f} | "
            f"{run.hwm_mib:,.0f} MiB | {run.rss_at_first_bind_mib:,.0f} MiB (at {run.first_bind_seconds} s) | "
            f"{run.peak_at_seconds} s | {run.rss_at_end_mib:,.0f} MiB |"
        )
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in runs], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
