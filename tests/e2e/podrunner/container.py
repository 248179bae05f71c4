"""Start one container: `python container.py SPEC.json`, as root, replaced by the container's process.

What a container runtime does between "create" and "start", in this order, in a process of its own:
a private mount and UTS namespace; the pod's network namespace; a root filesystem that is this machine's
seen through an overlay (writes land in a tmpfs that dies with the container; mount points such as
`/certs` never appear on the host); `/proc`, `/dev` and `/sys`; the volume mounts, read-only where asked;
`readOnlyRootFilesystem`; chroot; the capability bounding set and the user, groups and `no_new_privs` of
the securityContext; then exec of the image's entry point with the container's environment.

Standard library only, and nothing imported from the project: it runs before anything of the pod.
A failure before exec is written to the spec's `errorFile` (the kubelet's StartError message) and the
process exits 128.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from pathlib import Path

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
libc = ctypes.CDLL(None, use_errno=True)


def check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    encode = lambda s: s.encode() if s is not None else None  # noqa: E731
    check(libc.mount(encode(source), encode(target), encode(fstype), flags, encode(data)), f"mount {target}")


def make_traversable(root: Path, path: str) -> None:
    """Let any user reach `path` in this container's view (the image's /opt/phalanx is world-readable; the
    directories leading to this machine's Python and the checkout may not be, e.g. /root)."""
    parts = Path(path).parts[1:]
    for depth in range(1, len(parts) + 1):
        current = inside(root, "/" + "/".join(parts[:depth]))
        mode = current.stat().st_mode
        if not mode & 0o001:
            current.chmod((mode & 0o7777) | 0o005)


def inside(root: Path, path: str) -> Path:
    """`path` as the container sees it, under `root`: symlinks on the way (`/var/run -> /run`) are followed
    within the container's root, never out to the host's (runc's securejoin, simplified)."""
    resolved = root
    pending = list(Path(path).parts[1:])
    hops = 0
    while pending:
        part = pending.pop(0)
        candidate = resolved / part
        if candidate.is_symlink():
            hops += 1
            if hops > 40:
                raise OSError(40, f"{path}: too many levels of symbolic links")
            link = Path(os.readlink(candidate))
            pending = [*link.parts[1:], *pending] if link.is_absolute() else [*link.parts, *pending]
            if link.is_absolute():
                resolved = root
            continue
        resolved = resolved.parent if part == ".." and resolved != root else candidate
    return resolved


def bind(source: str, target: Path, read_only: bool) -> None:
    if Path(source).is_dir():
        target.mkdir(parents=True, exist_ok=True)
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch(exist_ok=True)
    mount(source, str(target), None, MS_BIND | MS_REC)
    if read_only:
        mount(None, str(target), None, MS_REMOUNT | MS_BIND | MS_RDONLY)


def prepare(spec: dict) -> None:  # type: ignore[type-arg]
    check(libc.unshare(CLONE_NEWNS | CLONE_NEWUTS), "unshare")
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    fd = os.open(spec["netns"], os.O_RDONLY)
    check(libc.setns(fd, CLONE_NEWNET), "setns")
    os.close(fd)
    hostname = spec["hostname"].encode()
    check(libc.sethostname(hostname, len(hostname)), "sethostname")

    layer = Path(spec["rootfs"])
    mount("tmpfs", str(layer), "tmpfs", 0, "mode=0755")
    for name in ("upper", "work", "root"):
        (layer / name).mkdir()
    root = layer / "root"
    mount("overlay", str(root), "overlay", 0, f"lowerdir=/,upperdir={layer}/upper,workdir={layer}/work")
    for system in ("proc", "dev", "sys"):
        mount(f"/{system}", str(root / system), None, MS_BIND | MS_REC)
    for path in spec["expose"]:
        make_traversable(root, path)
    for path, content in spec["files"].items():
        inside(root, path).write_text(content)
    for mounted in spec["binds"]:
        bind(mounted["source"], inside(root, mounted["target"]), mounted["readOnly"])
    targets = [Path(mounted["target"]) for mounted in spec["binds"]]
    for path in spec["expose"]:  # a volume over a parent (the chart's emptyDir on /tmp) must not hide the image
        if any(Path(path).is_relative_to(target) for target in targets):
            bind(path, inside(root, path), read_only=True)
    workdir = inside(root, spec["workdir"])
    if not workdir.exists():
        workdir.mkdir(parents=True)
        os.chown(workdir, *spec["workdirOwner"])
    if spec["readOnlyRootFilesystem"]:
        mount(None, str(root), None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    os.chroot(root)
    os.chdir(spec["workdir"])

    if spec["dropAllCapabilities"]:
        for capability in range(64):
            if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
                break  # past the last capability this kernel knows
    os.setgroups(spec["groups"])
    os.setgid(spec["gid"])
    os.setuid(spec["uid"])
    if spec["noNewPrivileges"]:
        check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


def main() -> None:
    spec = json.loads(Path(sys.argv[1]).read_text())
    argv, env = spec["argv"], spec["env"]
    error_fd = os.open(spec["errorFile"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        prepare(spec)
    except OSError as err:
        fail(error_fd, str(err))
    try:
        os.execvpe(argv[0], argv, env)
    except FileNotFoundError:
        fail(error_fd, f'exec: "{argv[0]}": executable file not found in $PATH')
    except OSError as err:
        fail(error_fd, f'exec: "{argv[0]}": {err.strerror}')


def fail(error_fd: int, message: str) -> None:
    os.write(error_fd, message.encode())
    print(f"podrunner: {message}", file=sys.stderr)
    sys.exit(128)


if __name__ == "__main__":
    main()
