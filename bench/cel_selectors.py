"""A DRA device selector in the two CEL libraries for Python: the reason DynamicResources uses cel-rust.

Compiles the selector of README's worked example (`device.attributes["gpu.example.com"].model == "a100"`) and
evaluates it against one device, as `scheduler/plugins/dynamic_resources/selectors.py` does (one context per device,
made once; the program compiled once), with `common-expression-language` (cel-rust's bindings, a runtime dependency)
and with `cel-python` (pure Python, the chart tests' dependency). A claim's selectors are asked of every device
whose verdict is not kept yet: 8,000 devices on 1,000 nodes. Times per call, best of `--repeat` rounds (microseconds).
Run: `.venv/bin/python bench/cel_selectors.py [--repeat 5] [--calls 2000]`.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import cel
import celpy
from celpy.adapter import json_to_cel

from scheduler.api.resource_slice import Device
from scheduler.plugins.dynamic_resources.selectors import device_context, device_value

EXPRESSION = 'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "a100"'
DEVICE = Device.model_validate(
    {
        "name": "gpu-0",
        "attributes": {"model": {"string": "a100"}, "numa": {"int": 0}},
        "capacity": {"memory": {"value": "40Gi"}},
    }
)


def best(repeat: int, calls: int, run: Callable[[], Any]) -> float:
    """Microseconds per call, the best round of `repeat`."""
    rounds = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        rounds.append((time.perf_counter() - start) / calls * 1e6)
    return min(rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()

    context = device_context("gpu.example.com", DEVICE)
    program = cel.compile(EXPRESSION)
    assert program.execute(context) is True

    env = celpy.Environment()
    celpy_program = env.program(env.compile(EXPRESSION))
    activation = {"device": json_to_cel(device_value("gpu.example.com", DEVICE))}
    assert bool(celpy_program.evaluate(activation)) is True

    compile_calls = max(1, args.calls // 10)
    rows = {
        "common-expression-language (cel-rust)": (
            best(args.repeat, compile_calls, lambda: cel.compile(EXPRESSION)),
            best(args.repeat, args.calls, lambda: program.execute(context)),
        ),
        "cel-python": (
            best(args.repeat, compile_calls, lambda: env.program(env.compile(EXPRESSION))),
            best(args.repeat, max(1, args.calls // 20), lambda: celpy_program.evaluate(activation)),
        ),
    }
    print(f"{'library':<40} {'compile us':>12} {'evaluate us':>12}")
    for library, (compiled, evaluated) in rows.items():
        print(f"{library:<40} {compiled:>12.1f} {evaluated:>12.1f}")


if __name__ == "__main__":
    main()
