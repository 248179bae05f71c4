"""Reading manifests: multi-document YAML or JSON, `kind: List` included, into typed objects.

Every failure is a `ManifestError` naming the file, the document (1-based, as `kubectl` counts) and
the field, so `phalanx simulate` can print one actionable line and exit 2 before acting on anything.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from scheduler.api.config import SchedulerConfiguration
from scheduler.api.csi import CSIDriver, CSINode
from scheduler.api.device_class import DeviceClass
from scheduler.api.meta import ApiModel
from scheduler.api.namespace import Namespace
from scheduler.api.node import Node
from scheduler.api.pdb import PodDisruptionBudget
from scheduler.api.persistent_volume import PersistentVolume
from scheduler.api.persistent_volume_claim import PersistentVolumeClaim
from scheduler.api.pod import Pod
from scheduler.api.pod_group import API_VERSION, NATIVE_API_VERSION, PodGroup
from scheduler.api.priority_class import PriorityClass
from scheduler.api.queue import Queue
from scheduler.api.resource_claim import API_VERSION as RESOURCE_API_VERSION
from scheduler.api.resource_claim import ResourceClaim, ResourceClaimTemplate
from scheduler.api.resource_slice import ResourceSlice
from scheduler.api.storage_class import StorageClass
from scheduler.api.workload import Workload

KINDS: dict[tuple[str, str], type[ApiModel]] = {
    ("v1", "Pod"): Pod,
    ("v1", "Node"): Node,
    ("v1", "Namespace"): Namespace,
    ("scheduling.k8s.io/v1", "PriorityClass"): PriorityClass,
    ("policy/v1", "PodDisruptionBudget"): PodDisruptionBudget,
    (API_VERSION, "PodGroup"): PodGroup,
    (NATIVE_API_VERSION, "PodGroup"): PodGroup,
    (API_VERSION, "Workload"): Workload,
    (NATIVE_API_VERSION, "Workload"): Workload,
    (API_VERSION, "Queue"): Queue,
    (API_VERSION, "SchedulerConfiguration"): SchedulerConfiguration,
    ("v1", "PersistentVolume"): PersistentVolume,
    ("v1", "PersistentVolumeClaim"): PersistentVolumeClaim,
    ("storage.k8s.io/v1", "StorageClass"): StorageClass,
    ("storage.k8s.io/v1", "CSINode"): CSINode,
    ("storage.k8s.io/v1", "CSIDriver"): CSIDriver,
    (RESOURCE_API_VERSION, "DeviceClass"): DeviceClass,
    (RESOURCE_API_VERSION, "ResourceSlice"): ResourceSlice,
    (RESOURCE_API_VERSION, "ResourceClaim"): ResourceClaim,
    (RESOURCE_API_VERSION, "ResourceClaimTemplate"): ResourceClaimTemplate,
}

# Kinds `kubectl get all -o yaml` emits that play no part in scheduling: skipped, not errors.
IGNORED_KINDS = frozenset(
    {
        "Service", "Endpoints", "EndpointSlice", "ConfigMap", "Secret", "ServiceAccount",
        "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "Job", "CronJob", "Event",
        "ReplicationController", "Lease",
    }
)  # fmt: skip


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's loader when PyYAML was built with it: a 50,000-pod `kubectl get -o yaml` dump parses
in seconds instead of minutes. Both build the same objects and raise the same `YAMLError`s."""


class ManifestError(ValueError):
    """Bad input; `str()` is the whole message: `FILE: document N (Kind ns/name): field: problem`."""


@dataclass(frozen=True, slots=True)
class Source:
    path: str
    document: int

    def describe(self, raw: Any) -> str:
        where = f"{self.path}: document {self.document}"
        if isinstance(raw, dict):
            meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
            name = meta.get("name") if isinstance(meta, dict) else None
            namespace = meta.get("namespace") if isinstance(meta, dict) else None
            kind = raw.get("kind", "object")
            if name:
                where += f" ({kind} {namespace + '/' if namespace else ''}{name})"
        return where


def field_path(loc: Sequence[int | str]) -> str:
    """`('spec', 'containers', 0, 'name')` -> `spec.containers[0].name`, camelCase as on the wire."""
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + part
    return text or "(document)"


def parse_object(raw: Any, source: Source) -> ApiModel | None:
    """One document to a typed object; None for a kind that scheduling ignores."""
    if not isinstance(raw, dict):
        raise ManifestError(f"{source.describe(raw)}: expected a mapping with apiVersion and kind")
    kind, api_version = raw.get("kind"), raw.get("apiVersion")
    if not kind or not isinstance(kind, str):
        raise ManifestError(f"{source.describe(raw)}: kind: Required value")
    if kind in IGNORED_KINDS:
        return None
    model = KINDS.get((str(api_version), kind))
    if model is None:
        known = ", ".join(sorted({f"{k} ({v})" for v, k in KINDS}))
        raise ManifestError(
            f"{source.describe(raw)}: kind: Unsupported value: {api_version}/{kind}: supported kinds are {known}"
        )
    try:
        return model.model_validate(raw)
    except ValidationError as err:
        problems = "; ".join(f"{field_path(e['loc'])}: {e['msg'].removeprefix('Value error, ')}" for e in err.errors())
        raise ManifestError(f"{source.describe(raw)}: {problems}") from None


def _items(raw: Any, source: Source) -> Iterator[tuple[Any, Source]]:
    """Flatten `kind: List` and typed lists (`PodList`, whose items carry no kind) into objects."""
    if isinstance(raw, dict) and isinstance(raw.get("kind"), str) and raw["kind"].endswith("List"):
        items = raw.get("items") or []
        if not isinstance(items, list):
            raise ManifestError(f"{source.describe(raw)}: items: must be a list")
        item_kind = raw["kind"].removesuffix("List") or None
        for item in items:
            if isinstance(item, dict) and item_kind and "kind" not in item:
                item = {"kind": item_kind, "apiVersion": raw.get("apiVersion"), **item}
            yield item, source
    else:
        yield raw, source


def read_documents(path: Path) -> list[tuple[Any, Source]]:
    """Raw documents of one file, in order; empty YAML documents are skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ManifestError(f"{path}: cannot read: {err}") from None
    documents: list[tuple[Any, Source]] = []
    if path.suffix == ".json":
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as err:
            raise ManifestError(f"{path}: document 1: not valid JSON: {err}") from None
        return list(_items(raw, Source(str(path), 1)))
    try:
        for number, raw in enumerate(yaml.load_all(text, Loader=_LOADER), start=1):
            if raw is not None:
                documents.extend(_items(raw, Source(str(path), number)))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        count = len(documents) + 1
        problem = getattr(err, "problem", None) or str(err)
        raise ManifestError(f"{path}: document {count}{line}: not valid YAML: {problem}") from None
    return documents


def expand_paths(paths: Sequence[str]) -> list[Path]:
    """Files as given; a directory contributes its `.yaml`, `.yml` and `.json` files in name order."""
    files: list[Path] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            files.extend(sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml", ".json")))
        elif path.exists():
            files.append(path)
        else:
            raise ManifestError(f"{given}: no such file or directory")
    return files


def load_manifests(paths: Sequence[str]) -> list[tuple[ApiModel, Source]]:
    """Every object of every file, typed; raises on the first bad document, before any is used."""
    objects: list[tuple[ApiModel, Source]] = []
    for path in expand_paths(paths):
        for raw, source in read_documents(path):
            parsed = parse_object(raw, source)
            if parsed is not None:
                objects.append((parsed, source))
    return objects
