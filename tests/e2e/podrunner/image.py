"""The one image the pod runner can "pull": the checkout's own Dockerfile, run from the installed environment.

A container runtime turns a pod's `image`, `command` and `args` into a process from the image's
ENTRYPOINT, CMD, ENV, USER and WORKDIR. The pod runner reads those from the final stage of the project's
Dockerfile, so a chart and an image that disagree (a renamed entry point, a CMD the chart relies on) fail
here as they would on a cluster. The image's filesystem is this machine's, with the checkout's installed
virtualenv standing at the path the Dockerfile installs Phalanx to (`/opt/phalanx`).

Docker's rules (https://docs.docker.com/reference/dockerfile/#understand-how-cmd-and-entrypoint-interact
and Kubernetes' "Define a Command and Arguments for a Container"): `command` replaces ENTRYPOINT and
drops CMD; `args` alone replaces CMD.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""PATH of the base image (python:3.11-slim), which the Dockerfile's `ENV PATH=...:$PATH` extends."""


class ImageRefused(Exception):
    """The image cannot be pulled: the reason the pod's container status shows (`ErrImagePull`)."""


@dataclass(frozen=True, slots=True)
class Image:
    repository: str
    tag: str
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    user: str = "0"
    workdir: str = "/"

    def argv(self, command: list[str] | None, args: list[str] | None) -> list[str]:
        """The process's argv, by Docker's rules for a pod's `command` and `args`."""
        if command:
            return [*command, *(args or [])]
        return [*self.entrypoint, *(args if args is not None else self.cmd)]

    @property
    def uid_gid(self) -> tuple[int, int]:
        """USER as numbers (the Dockerfile uses `uid:gid`; a bare uid runs with gid 0, as in Docker)."""
        uid, _, gid = self.user.partition(":")
        if not uid.isdigit() or (gid and not gid.isdigit()):
            raise ImageRefused(f"USER {self.user!r}: the pod runner needs numeric uid[:gid]")
        return int(uid), int(gid or 0)


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs: comments dropped, backslash continuations joined."""
    joined = re.sub(r"\\\n", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    found = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def _exec_form(value: str) -> tuple[str, ...]:
    """ENTRYPOINT/CMD: the JSON exec form, or the shell form as Docker runs it."""
    if value.startswith("["):
        return tuple(json.loads(value))
    return ("/bin/sh", "-c", value)


def _expand(value: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), value)


def _env_pairs(value: str, env: dict[str, str]) -> dict[str, str]:
    if "=" not in value.split(" ", 1)[0]:  # legacy `ENV KEY value`
        key, _, rest = value.partition(" ")
        return {key: rest.strip()}
    return dict(pair.split("=", 1) for pair in shlex.split(_expand(value, env)))


def read_dockerfile(path: Path, repository: str, tag: str) -> Image:
    """The final stage's ENTRYPOINT, CMD, ENV, USER and WORKDIR (ARG defaults only feed FROM)."""
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: dict[str, str] = {"PATH": BASE_PATH}
    user, workdir = "0", "/"
    for word, value in _instructions(path.read_text()):
        if word == "FROM":  # a new stage starts from its base image
            entrypoint, cmd, env, user, workdir = (), (), {"PATH": BASE_PATH}, "0", "/"
        elif word == "ENTRYPOINT":
            entrypoint, cmd = _exec_form(value), ()  # Docker resets CMD when ENTRYPOINT is set
        elif word == "CMD":
            cmd = _exec_form(value)
        elif word == "ENV":
            env |= _env_pairs(value, {**env})
        elif word == "USER":
            user = value
        elif word == "WORKDIR":
            workdir = value if value.startswith("/") else f"{workdir.rstrip('/')}/{value}"
    return Image(repository, tag, entrypoint, cmd, env, user, workdir)


def split_reference(reference: str) -> tuple[str, str]:
    """`registry/repo:tag` or `repo@sha256:...` -> (repository, tag or digest); `latest` when neither."""
    if "@" in reference:
        repository, digest = reference.split("@", 1)
        return repository, digest
    name, _, tag = reference.rpartition(":")
    if name and "/" not in tag:
        return name, tag
    return reference, "latest"


@dataclass(frozen=True, slots=True)
class Registry:
    """What can be pulled: the project's image, at the version the checkout builds."""

    image: Image

    def pull(self, reference: str) -> Image:
        repository, tag = split_reference(reference)
        if repository != self.image.repository:
            raise ImageRefused(
                f'rpc error: code = NotFound desc = failed to pull and unpack image "{reference}": '
                f"not found (the pod runner has only {self.image.repository}:{self.image.tag}, built from the "
                "checkout's Dockerfile)"
            )
        if tag != self.image.tag:
            raise ImageRefused(
                f'rpc error: code = NotFound desc = failed to pull and unpack image "{reference}": '
                f"manifest unknown (this checkout builds {self.image.repository}:{self.image.tag})"
            )
        return self.image
