"""A pod's volumes, made in its folder as the kubelet makes them, and kept current.

emptyDir, Secret, ConfigMap, downwardAPI and projected volumes (with the ServiceAccount token from the
TokenRequest API, bound to the pod, refreshed at 80% of its lifetime like the kubelet's token manager).
Files are swapped in one step through a `..data` link (the kubelet's atomic writer), so a reader never
sees half of an update. With `fsGroup`, files belong to that group and are group-readable.

The API server here runs without the ServiceAccount admission plugin (`../shared/kube` disables it), so
nothing adds the `kube-api-access-*` volume to pods: the runner mounts it itself, at the usual path, where
the plugin would have (unless `automountServiceAccountToken` is false or a volume is already there).
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.e2e.control_plane import Api, Json

SERVICE_ACCOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
AUTOMOUNT = "kube-api-access"
TOKEN_SECONDS = 3607
"""What the ServiceAccount admission plugin asks for (an hour, plus 7 s to tell it from a user's choice)."""


class VolumeError(Exception):
    """A volume cannot be made (missing Secret, unsupported kind): the pod's containers do not start."""


def field_value(pod: Json, path: str) -> str:
    """A `fieldRef.fieldPath` of the downward API, as the kubelet formats it."""
    meta, spec, status = pod["metadata"], pod.get("spec", {}), pod.get("status", {})
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
        "status.podIP": status.get("podIP", ""),
        "status.hostIP": status.get("hostIP", ""),
    }
    if path in simple:
        return str(simple[path])
    for kind in ("labels", "annotations"):
        entries = meta.get(kind) or {}
        if path == f"metadata.{kind}":
            return "\n".join(f'{k}="{v}"' for k, v in sorted(entries.items()))
        if path.startswith(f"metadata.{kind}['") and path.endswith("']"):
            return str(entries.get(path[len(f"metadata.{kind}['") : -2], ""))
    raise VolumeError(f"fieldRef {path!r} is not supported by the pod runner")


@dataclass(slots=True)
class Token:
    value: str
    refresh_at: float


@dataclass(slots=True)
class PodVolumes:
    """Every volume of one pod under `root/<name>`; `refresh()` rewrites what changed."""

    api: Api
    pod: Json
    root: Path
    fs_group: int | None
    token_refresh_seconds: float | None = None
    """Refresh tokens this often instead of at 80% of their lifetime (tests of the refresh itself)."""
    _automount: bool = False
    _tokens: dict[str, Token] = field(default_factory=dict)
    _renderers: dict[str, Callable[[], dict[str, tuple[bytes, int]]]] = field(default_factory=dict)

    @property
    def namespace(self) -> str:
        return str(self.pod["metadata"]["namespace"])

    def volumes(self) -> list[Json]:
        declared = list(self.pod["spec"].get("volumes") or [])
        if self._automount:
            declared.append({"name": AUTOMOUNT, "projected": {"sources": _api_access_sources()}})
        return declared

    def mounts(self, container: Json) -> list[Json]:
        """The container's volumeMounts, plus the token mount the ServiceAccount plugin would add."""
        mounts = list(container.get("volumeMounts") or [])
        if self._automount and not any(m["mountPath"] == SERVICE_ACCOUNT_PATH for m in mounts):
            mounts.append({"name": AUTOMOUNT, "mountPath": SERVICE_ACCOUNT_PATH, "readOnly": True})
        return mounts

    def path(self, name: str) -> Path:
        return self.root / name

    def _wants_token(self) -> bool:
        spec = self.pod["spec"]
        if not spec.get("serviceAccountName"):
            return False  # the plugin would have named `default`; a token cannot be bound to a pod without one
        wanted = spec.get("automountServiceAccountToken")
        if wanted is None:
            account = self.api.get(f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{self._account()}")
            wanted = (account or {}).get("automountServiceAccountToken", True)
        in_use = any(
            m["mountPath"] == SERVICE_ACCOUNT_PATH
            for c in spec.get("containers", [])
            for m in c.get("volumeMounts") or []
        )
        return bool(wanted) and not in_use

    def _account(self) -> str:
        return str(self.pod["spec"].get("serviceAccountName") or "default")

    def create(self) -> None:
        self._automount = self._wants_token()
        for volume in self.volumes():
            name = volume["name"]
            target = self.path(name)
            target.mkdir(parents=True, exist_ok=True)
            if "emptyDir" in volume:
                target.chmod(0o777)
                continue
            renderer = self._renderer(volume)
            self._renderers[name] = renderer
            _write_atomically(target, renderer(), self.fs_group)

    def refresh(self) -> None:
        for name, renderer in self._renderers.items():
            with contextlib.suppress(VolumeError):  # keep the last good contents, as the kubelet does
                _write_atomically(self.path(name), renderer(), self.fs_group)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def _renderer(self, volume: Json) -> Callable[[], dict[str, tuple[bytes, int]]]:
        name = volume["name"]
        for kind in ("secret", "configMap", "downwardAPI", "projected"):
            if kind in volume:
                source = volume[kind]
                mode = int(source.get("defaultMode", 0o644))
                if kind == "projected":
                    return lambda: self._projected(name, source["sources"], mode)
                return lambda kind=kind: self._source(name, kind, source, mode)
        kinds = sorted(set(volume) - {"name"})
        raise VolumeError(f"volume {name!r}: {', '.join(kinds)} volumes are not supported by the pod runner")

    def _projected(self, volume: str, sources: list[Json], mode: int) -> dict[str, tuple[bytes, int]]:
        files: dict[str, tuple[bytes, int]] = {}
        for source in sources:
            (kind, spec), *_ = source.items()
            if kind == "serviceAccountToken":
                files[spec["path"]] = (self._token(volume, spec).encode(), int(spec.get("mode", mode)))
            else:
                files |= self._source(volume, kind, spec, mode)
        return files

    def _source(self, volume: str, kind: str, spec: Json, mode: int) -> dict[str, tuple[bytes, int]]:
        if kind == "downwardAPI":
            return {
                item["path"]: (
                    field_value(self.pod, item["fieldRef"]["fieldPath"]).encode(),
                    int(item.get("mode", mode)),
                )
                for item in spec.get("items", [])
            }
        if kind not in ("secret", "configMap"):
            raise VolumeError(f"volume {volume!r}: {kind} sources are not supported by the pod runner")
        name = spec.get("secretName") or spec.get("name")
        resource = "secrets" if kind == "secret" else "configmaps"
        found = self.api.get(f"/api/v1/namespaces/{self.namespace}/{resource}/{name}")
        if found is None:
            if spec.get("optional"):
                return {}
            raise VolumeError(f'MountVolume.SetUp failed for volume "{volume}": {kind} "{name}" not found')
        data = {k: base64.b64decode(v) for k, v in (found.get("data") or {}).items()} if kind == "secret" else {}
        if kind == "configMap":
            data = {k: str(v).encode() for k, v in (found.get("data") or {}).items()}
            data |= {k: base64.b64decode(v) for k, v in (found.get("binaryData") or {}).items()}
        items = spec.get("items")
        if not items:
            return {key: (value, mode) for key, value in data.items()}
        missing = [item["key"] for item in items if item["key"] not in data]
        if missing and not spec.get("optional"):
            raise VolumeError(
                f'MountVolume.SetUp failed for volume "{volume}": {kind} "{name}" has no key {missing[0]}'
            )
        return {item["path"]: (data[item["key"]], int(item.get("mode", mode))) for item in items if item["key"] in data}

    def _token(self, volume: str, spec: Json) -> str:
        key = f"{volume}/{spec['path']}"
        held = self._tokens.get(key)
        if held is not None and time.time() < held.refresh_at:
            return held.value
        seconds = int(spec.get("expirationSeconds", TOKEN_SECONDS))
        meta = self.pod["metadata"]
        request = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [spec["audience"]] if spec.get("audience") else [],
                "expirationSeconds": seconds,
                "boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": meta["name"], "uid": meta["uid"]},
            },
        }
        path = f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{self._account()}/token"
        reply = self.api.request("POST", path, request)
        if reply.status != 201:
            raise VolumeError(f'MountVolume.SetUp failed for volume "{volume}": token request: {reply.message}')
        lifetime = self.token_refresh_seconds or 0.8 * seconds
        self._tokens[key] = Token(reply.body["status"]["token"], time.time() + lifetime)
        return self._tokens[key].value


def _api_access_sources() -> list[Json]:
    return [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_SECONDS}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}},
    ]


def _write_atomically(directory: Path, files: dict[str, tuple[bytes, int]], fs_group: int | None) -> None:
    """Publish `files` (relative path -> content, mode) under `directory` through one `..data` link swap."""
    data_link = directory / "..data"
    if (
        data_link.is_symlink()
        and all(
            (data_link / name).is_file() and (data_link / name).read_bytes() == content
            for name, (content, _) in files.items()
        )
        and _listed(data_link) == set(files)
    ):
        return
    fresh = Path(tempfile.mkdtemp(dir=directory, prefix=f"..{time.strftime('%Y_%m_%d_%H_%M_%S')}."))
    for name, (content, mode) in files.items():
        target = fresh / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        target.chmod(mode | (0o440 if fs_group is not None else 0))
    for path in [fresh, *fresh.rglob("*")]:
        if fs_group is not None:
            os.chown(path, 0, fs_group)
        if path.is_dir():
            path.chmod(0o755 | (0o2000 if fs_group is not None else 0))
    previous = data_link.resolve() if data_link.is_symlink() else None
    staged = directory / "..data_tmp"
    staged.unlink(missing_ok=True)
    staged.symlink_to(fresh.name)
    os.replace(staged, data_link)
    for top in {name.split("/")[0] for name in files}:
        link = directory / top
        if not link.is_symlink():
            link.symlink_to(Path("..data") / top)
    if previous is not None and previous != fresh:
        shutil.rmtree(previous, ignore_errors=True)
    if fs_group is not None:
        os.chown(directory, 0, fs_group)


def _listed(data: Path) -> set[str]:
    return {str(p.relative_to(data)) for p in data.rglob("*") if p.is_file()}


def env_value(api: Api, pod: Json, var: Json) -> str | None:
    """One `env` entry: a value, or a fieldRef / secretKeyRef / configMapKeyRef (None: optional and absent)."""
    if "value" in var:
        return str(var["value"])
    source: Any = var.get("valueFrom") or {}
    if "fieldRef" in source:
        return field_value(pod, source["fieldRef"]["fieldPath"])
    namespace = pod["metadata"]["namespace"]
    for kind, resource in (("secretKeyRef", "secrets"), ("configMapKeyRef", "configmaps")):
        if kind in source:
            ref = source[kind]
            found = api.get(f"/api/v1/namespaces/{namespace}/{resource}/{ref['name']}") or {}
            data = found.get("data") or {}
            if ref["key"] not in data:
                if ref.get("optional"):
                    return None
                what = "secret" if kind == "secretKeyRef" else "configmap"
                raise VolumeError(f"couldn't find key {ref['key']} in {what} {namespace}/{ref['name']}")
            raw = data[ref["key"]]
            return base64.b64decode(raw).decode() if kind == "secretKeyRef" else str(raw)
    raise VolumeError(f"env {var['name']}: {', '.join(source) or 'no value'} is not supported by the pod runner")


def env_from(api: Api, pod: Json, source: Json) -> dict[str, str]:
    """One `envFrom` entry: every key of a ConfigMap or Secret, with its prefix."""
    namespace = pod["metadata"]["namespace"]
    kind = "secretRef" if "secretRef" in source else "configMapRef"
    ref = source[kind]
    resource = "secrets" if kind == "secretRef" else "configmaps"
    found = api.get(f"/api/v1/namespaces/{namespace}/{resource}/{ref['name']}")
    if found is None:
        if ref.get("optional"):
            return {}
        raise VolumeError(f'{resource[:-1]} "{ref["name"]}" not found')
    data = found.get("data") or {}
    decode: Callable[[str], str] = (lambda v: base64.b64decode(v).decode()) if kind == "secretRef" else str
    return {source.get("prefix", "") + k: decode(v) for k, v in data.items()}
