"""Each pod's own network: a namespace joined by a veth pair to a bridge of the runner, and the API relay.

The API server refuses loopback addresses in EndpointSlices, so pods cannot all share 127.0.0.1: each
gets a network namespace with one address of the runner's /24 inside 198.18.0.0/15 (RFC 2544, reserved
for benchmarks, routed nowhere), which becomes `status.podIP`. The API server, on the host, reaches it
through the bridge, as it reaches a webhook pod in a cluster (`--enable-aggregator-routing`).

Inside a pod, the API server is where the in-cluster config looks for it, `127.0.0.1:<its port>`
(`KUBERNETES_SERVICE_HOST`/`PORT`): a relay listens there in the pod's namespace and forwards each
connection to the real API server. Its listening socket is made by a thread that entered the pod's
namespace (setns(2) acts on the calling thread only), so one process serves every pod's relay.

Every name the runner makes starts with its prefix (`phx` and four hex digits), so `sweep` removes all
of it, and the processes left inside, after a runner that was killed. A runner holds a lock on its prefix
for its life (`claim`); one that starts sweeps every prefix nobody holds, which catches what a runner left
when its watchdog was killed with it (a whole process tree killed at once).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import ipaddress
import os
import random
import selectors
import socket
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")
CLONE_NEWNET = 0x40000000
NETNS_DIR = Path("/run/netns")
CLAIMS = Path("/run/phalanx-podrunner")
"""`<prefix>.lock` per live runner, locked (flock) for its life: the kernel drops the lock however it ends."""
PREFIX_LENGTH = len("phx") + 4
RANGE = ipaddress.ip_network("198.18.0.0/15")
_libc = ctypes.CDLL(None, use_errno=True)


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def in_namespace(netns: str, action: Callable[[], T]) -> T:
    """Run `action` in a thread that joined network namespace `netns`; sockets it makes stay there."""
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            fd = os.open(NETNS_DIR / netns, os.O_RDONLY)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns into {netns}")
            finally:
                os.close(fd)
            result.append(action())
        except BaseException as err:  # re-raised in the caller's thread
            failure.append(err)

    thread = threading.Thread(target=run, name=f"setns-{netns}")
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


def _used_subnets() -> set[ipaddress.IPv4Network]:
    routes = ip("-4", "route", "show").stdout.split()
    return {ipaddress.ip_network(word, strict=False) for word in routes if "/" in word}


@dataclass(slots=True)
class Bridge:
    """The runner's bridge on the host, its /24 and the addresses handed out."""

    prefix: str
    subnet: ipaddress.IPv4Network = field(init=False)
    _next: int = 2
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def name(self) -> str:
        return f"{self.prefix}br"

    @property
    def gateway(self) -> str:
        return str(self.subnet.network_address + 1)

    def create(self) -> Bridge:
        used = _used_subnets()
        free = [s for s in RANGE.subnets(new_prefix=24) if not any(s.overlaps(u) for u in used)]
        self.subnet = random.choice(free[1:])  # not 198.18.0.0/24, which hand-made test hosts favour
        ip("link", "add", self.name, "type", "bridge")
        ip("addr", "add", f"{self.gateway}/24", "dev", self.name)
        ip("link", "set", self.name, "up")
        return self

    def remove(self) -> None:
        ip("link", "del", self.name, check=False)

    def allocate(self) -> tuple[int, str]:
        with self._lock:
            index = self._next
            self._next += 1
        if index > 254:
            raise RuntimeError(f"{self.subnet}: no address left for another pod")
        return index, str(self.subnet.network_address + index)


@dataclass(slots=True)
class Sandbox:
    """One pod's network namespace, its veth pair and its address."""

    bridge: Bridge
    netns: str = ""
    address: str = ""
    _host_link: str = ""

    def create(self) -> Sandbox:
        index, self.address = self.bridge.allocate()
        prefix = self.bridge.prefix
        self.netns, self._host_link = f"{prefix}-pod{index}", f"{prefix}v{index}"
        ip("netns", "add", self.netns)
        ip("link", "add", self._host_link, "type", "veth", "peer", "name", "eth0", "netns", self.netns)
        ip("link", "set", self._host_link, "master", self.bridge.name, "up")
        ip("-n", self.netns, "addr", "add", f"{self.address}/24", "dev", "eth0")
        ip("-n", self.netns, "link", "set", "lo", "up")
        ip("-n", self.netns, "link", "set", "eth0", "up")
        ip("-n", self.netns, "route", "add", "default", "via", self.bridge.gateway)
        return self

    def remove(self) -> None:
        if self.netns:
            kill_processes_in(self.netns)
            ip("netns", "del", self.netns, check=False)  # takes its end of the veth pair, and so both
            ip("link", "del", self._host_link, check=False)


def kill_processes_in(netns: str) -> None:
    for pid in ip("netns", "pids", netns, check=False).stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), 9)


class Relay:
    """`127.0.0.1:port` inside pods' namespaces, forwarded to `127.0.0.1:port` on the host (the API server)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._selector = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._listeners: dict[str, socket.socket] = {}
        self._thread = threading.Thread(target=self._serve, name="api-relay", daemon=True)
        self._thread.start()

    def open(self, netns: str) -> None:
        def listen() -> socket.socket:
            server = socket.socket()
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("127.0.0.1", self.port))
            server.listen(64)
            return server

        server = in_namespace(netns, listen)
        server.setblocking(False)
        with self._lock:
            self._listeners[netns] = server
            self._selector.register(server, selectors.EVENT_READ)

    def close(self, netns: str) -> None:
        with self._lock:
            server = self._listeners.pop(netns, None)
            if server is not None:
                self._selector.unregister(server)
                server.close()

    def _serve(self) -> None:
        while True:
            for key, _ in self._selector.select(timeout=0.5):
                with contextlib.suppress(OSError):
                    inside, _ = key.fileobj.accept()  # type: ignore[union-attr]
                    threading.Thread(target=self._pipe, args=(inside,), daemon=True).start()

    def _pipe(self, inside: socket.socket) -> None:
        try:
            outside = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        except OSError:
            inside.close()
            return
        outside.settimeout(None)
        inside.setblocking(True)

        def copy(source: socket.socket, target: socket.socket) -> None:
            with contextlib.suppress(OSError):
                while chunk := source.recv(65536):
                    target.sendall(chunk)
            with contextlib.suppress(OSError):
                target.shutdown(socket.SHUT_WR)

        back = threading.Thread(target=copy, args=(outside, inside), daemon=True)
        back.start()
        copy(inside, outside)
        back.join()
        inside.close()
        outside.close()


def claim(prefix: str) -> None:
    """Hold `prefix` for this process's life (its descriptor is never closed), then sweep what no runner holds.

    The lock file is locked before it gets its name, so another runner never finds it unlocked."""
    CLAIMS.mkdir(parents=True, exist_ok=True)
    pending = CLAIMS / f".{prefix}.{os.getpid()}"
    fd = os.open(pending, os.O_CREAT | os.O_RDWR, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    pending.rename(CLAIMS / f"{prefix}.lock")
    sweep_orphans()


def sweep_orphans() -> list[str]:
    """Sweep every prefix that names a namespace or a link and that no live runner holds."""
    held = {lock.stem for lock in CLAIMS.glob("phx*.lock") if _held(lock)}
    named = [p.name for p in NETNS_DIR.iterdir()] if NETNS_DIR.exists() else []
    named += [_link_name(line) for line in ip("-o", "link", "show").stdout.splitlines()]
    prefixes = {name[:PREFIX_LENGTH] for name in named if name.startswith("phx")} - held
    return [removed for prefix in sorted(prefixes) for removed in sweep(prefix)]


def _held(lock: Path) -> bool:
    """Whether a live runner holds `lock`; one nobody holds is removed."""
    try:
        fd = os.open(lock, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.unlink(missing_ok=True)  # while locked: a runner claiming the name anew is never undone
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _link_name(line: str) -> str:
    """The name in a line of `ip -o link show` (`5: phx1234v3@if2: <...>`)."""
    return line.split(":")[1].strip().split("@")[0]


def sweep(prefix: str) -> list[str]:
    """Remove every namespace and link named with `prefix` (and kill what runs in those namespaces), and the
    prefix's lock file once no runner holds it."""
    _held(CLAIMS / f"{prefix}.lock")
    removed = []
    if NETNS_DIR.exists():
        for entry in NETNS_DIR.iterdir():
            if entry.name.startswith(prefix):
                kill_processes_in(entry.name)
                ip("netns", "del", entry.name, check=False)
                removed.append(entry.name)
    for line in ip("-o", "link", "show").stdout.splitlines():
        name = _link_name(line)
        if name.startswith(prefix):
            ip("link", "del", name, check=False)
            removed.append(name)
    return removed
