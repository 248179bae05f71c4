"""`python -m tests.e2e.podrunner --kube-dir DIR --node NAME --state DIR --prefix phxNNNN [--owner-pid PID]`.

Runs until SIGTERM/SIGINT, or until the owner process exits, then kills its pods, removes their network
namespaces, its bridge and its node. `--sweep PREFIX` removes what a killed runner left behind (the e2e
fixture keeps a watchdog that runs it when the runner dies); a runner that starts also sweeps every prefix
no live runner holds (`network.claim`).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import logging
import os
import signal
import sys
import threading
from pathlib import Path

import structlog

from tests.chart.conftest import IMAGE_REPOSITORY
from tests.e2e.control_plane import ROOT, Api
from tests.e2e.podrunner.image import Registry, read_dockerfile
from tests.e2e.podrunner.kubelet import Node, NodeSettings
from tests.e2e.podrunner.network import claim, sweep


def settings(args: argparse.Namespace) -> NodeSettings:
    env = json.loads((Path(args.kube_dir) / "env.json").read_text())
    api = Api(env["KUBE_APISERVER_URL"], env["KUBE_ADMIN_TOKEN"], env["KUBE_CA_FILE"])
    image = read_dockerfile(ROOT / "Dockerfile", IMAGE_REPOSITORY, importlib.metadata.version("phalanx"))
    venv = Path(sys.prefix)
    return NodeSettings(
        name=args.node,
        state=Path(args.state),
        api=api,
        api_port=int(env["KUBE_APISERVER_PORT"]),
        registry=Registry(image),
        image_root=venv,
        expose=(sys.base_prefix, str(venv), str(ROOT)),
        token_refresh_seconds=args.token_refresh_seconds,
    )


def owner_watch(pid: int, stop: threading.Event) -> None:
    while not stop.wait(1.0):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            stop.set()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.e2e.podrunner")
    parser.add_argument("--kube-dir", help="the up.sh folder (env.json)")
    parser.add_argument("--node", help="the node to register and serve")
    parser.add_argument("--state", help="folder for pods' volumes, layers and logs")
    parser.add_argument("--prefix", help="phx and four hex digits: every namespace and link made is named with it")
    parser.add_argument("--owner-pid", type=int, help="stop when this process has exited")
    parser.add_argument("--token-refresh-seconds", type=float, help="refresh ServiceAccount tokens this often")
    parser.add_argument("--sweep", metavar="PREFIX", help="remove what a runner with this prefix left, and exit")
    args = parser.parse_args()
    if args.sweep:
        print("\n".join(sweep(args.sweep)))
        return 0
    claim(args.prefix)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    structlog.configure(logger_factory=structlog.stdlib.LoggerFactory())
    node = Node(settings(args), args.prefix)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if args.owner_pid:
        threading.Thread(target=owner_watch, args=(args.owner_pid, stop), daemon=True).start()
    runner = threading.Thread(target=node.run, name="node", daemon=True)
    runner.start()
    stop.wait()
    node.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
