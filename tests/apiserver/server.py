"""A threaded kube-apiserver look-alike on 127.0.0.1: storage, REST verbs, watch, fault injection.

See the package docstring (`tests/apiserver/__init__.py`) for the API tests use.
"""

from __future__ import annotations

import bisect
import contextlib
import copy
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.apiserver.patching import BadPatch, PatchFailed, apply_patch
from tests.apiserver.resources import BY_PATH, RESOURCE_TYPES, ResourceType

Obj = dict[str, Any]

METADATA_ORDER = (
    "name",
    "generateName",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
)
ZONE_LABEL = "topology.kubernetes.io/zone"
VERSION = {
    "major": "1",
    "minor": "36",
    "gitVersion": "v1.36.2",
    "gitCommit": "98b35193b2ac7a23a673325f5e9b830ecd5ba406",
    "gitTreeState": "clean",
    "platform": "linux/amd64",
}


def timestamp(at: datetime | None = None) -> str:
    return (at or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_body(code: int, reason: str, message: str, details: Obj | None = None) -> Obj:
    """A `Status` with the key order kube-apiserver uses (`api/*.json` fixtures)."""
    body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message}
    if reason:
        body["reason"] = reason
    if details is not None:
        body["details"] = details
    body["code"] = code
    return body


class ApiError(Exception):
    def __init__(self, code: int, body: Obj, headers: dict[str, str] | None = None) -> None:
        super().__init__(body.get("message", ""))
        self.code = code
        self.body = body
        self.headers = headers or {}


def not_found(rtype: ResourceType, name: str) -> ApiError:
    details: Obj = {"name": name}
    if rtype.group:
        details["group"] = rtype.group
    details["kind"] = rtype.plural
    return ApiError(404, status_body(404, "NotFound", f'{rtype.qualified} "{name}" not found', details))


def conflict(rtype: ResourceType, name: str, why: str) -> ApiError:
    details: Obj = {"name": name}
    if rtype.group:
        details["group"] = rtype.group
    details["kind"] = rtype.plural
    message = f'Operation cannot be fulfilled on {rtype.qualified} "{name}": {why}'
    return ApiError(409, status_body(409, "Conflict", message, details))


def invalid(rtype: ResourceType, name: str, field_path: str, cause_reason: str, detail: str) -> ApiError:
    details: Obj = {"name": name}
    if rtype.group:
        details["group"] = rtype.group
    details["kind"] = rtype.kind
    details["causes"] = [{"reason": cause_reason, "message": detail, "field": field_path}]
    group_kind = f"{rtype.kind}.{rtype.group}" if rtype.group else rtype.kind
    message = f'{group_kind} "{name}" is invalid: {field_path}: {detail}'
    return ApiError(422, status_body(422, "Invalid", message, details))


def ordered(rtype: ResourceType, obj: Obj) -> Obj:
    """Key order as served: struct order for built-in kinds, alphabetical for custom resources."""
    meta = obj.get("metadata", {})
    if rtype.custom:
        out = {k: obj[k] for k in sorted(obj)}
        out["metadata"] = {k: meta[k] for k in sorted(meta)}
        return out
    out = {k: obj[k] for k in ("kind", "apiVersion", "metadata") if k in obj}
    out.update({k: v for k, v in obj.items() if k not in out})
    ordered_meta = {k: meta[k] for k in METADATA_ORDER if k in meta}
    ordered_meta.update({k: v for k, v in meta.items() if k not in ordered_meta})
    out["metadata"] = ordered_meta
    return out


@dataclass
class Fault:
    """The next `remaining` requests whose method and path match fail with `status`, hang, or are answered late."""

    method: str
    path_prefix: str
    remaining: int
    status: int = 0
    retry_after: int | None = None
    hang_seconds: float = 0.0
    body: Obj | None = None
    delay_seconds: float = 0.0

    def matches(self, method: str, path: str) -> bool:
        return self.remaining > 0 and self.method in ("*", method) and path.startswith(self.path_prefix)


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    query: dict[str, str]
    body: Any


@dataclass(slots=True)
class WatchEvent:
    rv: int
    rtype: ResourceType
    type: str
    obj: Obj


@dataclass
class Store:
    """Objects by resource type and (namespace, name), one global resourceVersion, a bounded history."""

    objects: dict[ResourceType, dict[tuple[str, str], Obj]] = field(
        default_factory=lambda: {rtype: {} for rtype in RESOURCE_TYPES}
    )
    rv: int = 1
    oldest_rv: int = 1
    history: list[WatchEvent] = field(default_factory=list)
    history_rvs: list[int] = field(default_factory=list)


class ApiServer:
    """The loopback API server; construct, `start()`, use `url` or `kubeconfig(path)`, `stop()`."""

    def __init__(self, history_limit: int = 200_000, bookmark_interval: float = 1.0) -> None:
        self.history_limit = history_limit
        self.bookmark_interval = bookmark_interval
        self.watch_timeout_default = 300.0
        self.termination_seconds = 0.05
        self.hold_terminating = False
        self.store = Store()
        self.faults: list[Fault] = []
        self.requests: list[Request] = []
        self.record_requests = True
        self.lock = threading.Condition(threading.RLock())
        self.port = 0
        self._generation = 0
        self._connections: set[socket.socket] = set()
        self._http: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._terminating: dict[tuple[ResourceType, str, str], float] = {}
        self._stopped = threading.Event()
        self._reaper = threading.Thread(target=self._reap, name="apiserver-reaper", daemon=True)
        self.grants: set[tuple[str, str, str, str, str]] = set()
        """(user, verb, group, resource[/subresource], namespace or "*") a SubjectAccessReview finds allowed."""
        self.aggregated: dict[str, Callable[[str, dict[str, str]], tuple[int, Obj]]] = {}
        """`/apis/<group>/<version>` -> the handler of a GET under it (an APIService's server, in-process)."""

    # lifecycle

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ApiServer:
        self._serve()
        self._reaper.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._shutdown()

    def restart(self, down_seconds: float = 0.0, compact: bool = True) -> None:
        """Drop every connection, refuse connections for `down_seconds`, then serve the same storage.

        A restarted apiserver's watch cache starts empty, so with `compact` a watch from an older
        resourceVersion gets 410 Expired, as in `api/watch-pods-too-old-410.jsonl`.
        """
        self._shutdown()
        if compact:
            self.compact()
        time.sleep(down_seconds)
        self._serve()

    def allow(self, user: str, verb: str, group: str, resource: str, namespace: str = "*") -> None:
        """Let `user` do `verb` on `resource` (`pods/explanation`) of `group` in `namespace` ("*": any, and the
        cluster scope), as SubjectAccessReviews see it."""
        with self.lock:
            self.grants.add((user, verb, group, resource, namespace))

    def review(self, review: Obj) -> Obj:
        """A SubjectAccessReview answered from `grants`."""
        spec = review.get("spec") or {}
        attributes = spec.get("resourceAttributes") or {}
        resource = attributes.get("resource", "")
        if attributes.get("subresource"):
            resource += "/" + attributes["subresource"]
        namespace = attributes.get("namespace") or ""
        with self.lock:
            allowed = any(
                (spec.get("user"), attributes.get("verb"), attributes.get("group") or "", resource)
                == (user, verb, group, granted)
                and scope in ("*", namespace)
                for user, verb, group, granted, scope in self.grants
            )
        status: Obj = {"allowed": allowed}
        if not allowed:
            status["reason"] = "no grant in the loopback server"
        return {**review, "status": status}

    def kubeconfig(self, path: str | Path) -> Path:
        """Write a kubeconfig for this server that `kubernetes.config.load_kube_config` accepts."""
        target = Path(path)
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "loopback", "cluster": {"server": self.url}}],
            "users": [{"name": "tester", "user": {"token": "loopback-token"}}],
            "contexts": [{"name": "loopback", "context": {"cluster": "loopback", "user": "tester"}}],
            "current-context": "loopback",
        }
        target.write_text(json.dumps(config, indent=2))
        return target

    def _serve(self) -> None:
        server = self

        class Handler(_Handler):
            api = server
            generation = server._generation

        http = _HTTPServer(("127.0.0.1", self.port), Handler)
        self.port = http.server_address[1]
        self._http = http
        self._thread = threading.Thread(
            target=http.serve_forever, kwargs={"poll_interval": 0.05}, name="apiserver", daemon=True
        )
        self._thread.start()

    def _shutdown(self) -> None:
        with self.lock:
            self._generation += 1
            self.lock.notify_all()
            connections = list(self._connections)
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
            self._http = None
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    # fault injection and storage control

    def fail(
        self,
        method: str,
        path_prefix: str,
        status: int,
        times: int = 1,
        retry_after: int | None = None,
        body: Obj | None = None,
    ) -> Fault:
        """Answer the next `times` matching requests with `status`.

        A watch given 410 without a `body` gets the apiserver's HTTP 200 + ERROR event; with a body, an HTTP 410.
        """
        fault = Fault(method, path_prefix, times, status=status, retry_after=retry_after, body=body)
        with self.lock:
            self.faults.append(fault)
        return fault

    def hang(self, method: str, path_prefix: str, seconds: float, times: int = 1) -> Fault:
        """Hold the next `times` matching requests for `seconds`, then drop the connection unanswered."""
        fault = Fault(method, path_prefix, times, hang_seconds=seconds)
        with self.lock:
            self.faults.append(fault)
        return fault

    def delay(self, method: str, path_prefix: str, seconds: float, times: int = 1) -> Fault:
        """Hold the next `times` matching requests for `seconds`, then serve them as usual (a slow server)."""
        fault = Fault(method, path_prefix, times, delay_seconds=seconds)
        with self.lock:
            self.faults.append(fault)
        return fault

    def compact(self) -> int:
        """Bump the oldest retained resourceVersion to a new one: every older watch or Exact list gets 410."""
        with self.lock:
            self.store.rv += 1
            self.store.oldest_rv = self.store.rv
            self.store.history.clear()
            self.store.history_rvs.clear()
            self.lock.notify_all()
            return self.store.rv

    def finish_terminating(self) -> None:
        """Remove every pod that is terminating now, as kubelets would after the grace period."""
        with self.lock:
            due = list(self._terminating)
            for key in due:
                self._remove_terminating(key)

    def mark_deleting(self, name: str, namespace: str = "default") -> None:
        """Store pod `name` as kube-apiserver does for an instant when it deletes a pod with no grace period: a
        deletionTimestamp and `deletionGracePeriodSeconds: 0` (a MODIFIED event), before the DELETED one. Our
        DELETE of such a pod goes straight to DELETED; the next DELETE of it removes it."""
        rtype = self._type_by_plural("pods", "")
        with self.lock:
            pod = copy.deepcopy(self.do_get(rtype, namespace, name))
            pod["metadata"] |= {"deletionTimestamp": timestamp(), "deletionGracePeriodSeconds": 0}
            self._commit(rtype, (namespace, name), pod, "MODIFIED")

    def resource_version(self) -> int:
        with self.lock:
            return self.store.rv

    def requests_matching(self, method: str, path_prefix: str) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.method == method and r.path.startswith(path_prefix)]

    # direct storage access for test setup and assertions (no HTTP, no faults)

    def create(self, obj: Obj) -> Obj:
        rtype = self._type_of(obj)
        namespace = obj.get("metadata", {}).get("namespace", "default") if rtype.namespaced else ""
        with self.lock:
            return self.do_create(rtype, namespace, copy.deepcopy(obj), {}, keep_status=True)

    def apply(self, obj: Obj) -> Obj:
        """Create the object, or replace the stored one unconditionally."""
        rtype = self._type_of(obj)
        meta = obj.get("metadata", {})
        namespace = meta.get("namespace", "default") if rtype.namespaced else ""
        with self.lock:
            if (namespace, meta["name"]) not in self.store.objects[rtype]:
                return self.do_create(rtype, namespace, copy.deepcopy(obj), {}, keep_status=True)
            body = copy.deepcopy(obj)
            body["metadata"].pop("resourceVersion", None)
            return self.do_update(rtype, namespace, meta["name"], body, subresource="", whole=True)

    def get(self, plural: str, name: str, namespace: str = "", group: str = "") -> Obj | None:
        rtype = self._type_by_plural(plural, group)
        with self.lock:
            found = self.store.objects[rtype].get((namespace if rtype.namespaced else "", name))
            return copy.deepcopy(found) if found is not None else None

    def list(self, plural: str, namespace: str = "", group: str = "") -> list[Obj]:
        rtype = self._type_by_plural(plural, group)
        with self.lock:
            return [
                copy.deepcopy(obj)
                for (ns, _), obj in sorted(self.store.objects[rtype].items())
                if not namespace or ns == namespace
            ]

    def delete(self, plural: str, name: str, namespace: str = "", group: str = "") -> None:
        """Remove at once (no grace period), as a force delete does."""
        rtype = self._type_by_plural(plural, group)
        with self.lock:
            self.do_delete(rtype, namespace if rtype.namespaced else "", name, {"gracePeriodSeconds": 0})

    def _type_of(self, obj: Obj) -> ResourceType:
        group, _, version = obj["apiVersion"].rpartition("/")
        for rtype in RESOURCE_TYPES:
            if (rtype.group, rtype.version, rtype.kind) == (group, version, obj["kind"]):
                return rtype
        raise KeyError(f"no resource serves {obj['apiVersion']} {obj['kind']}")

    def _type_by_plural(self, plural: str, group: str) -> ResourceType:
        for rtype in RESOURCE_TYPES:
            if rtype.plural == plural and rtype.group == group:
                return rtype
        raise KeyError(f"no resource {plural}.{group}")

    # storage operations (called with self.lock held)

    def _commit(self, rtype: ResourceType, key: tuple[str, str], obj: Obj, event: str) -> Obj:
        store = self.store
        store.rv += 1
        obj["metadata"]["resourceVersion"] = str(store.rv)
        obj = ordered(rtype, obj)
        if event == "DELETED":
            store.objects[rtype].pop(key, None)
        else:
            store.objects[rtype][key] = obj
        store.history.append(WatchEvent(store.rv, rtype, event, obj))
        store.history_rvs.append(store.rv)
        if len(store.history) > self.history_limit:
            drop = len(store.history) - self.history_limit // 2
            store.oldest_rv = store.history_rvs[drop] - 1
            del store.history[:drop]
            del store.history_rvs[:drop]
        self.lock.notify_all()
        return copy.deepcopy(obj)

    def do_create(
        self, rtype: ResourceType, namespace: str, body: Obj, query: dict[str, str], keep_status: bool = False
    ) -> Obj:
        """POST semantics; `keep_status` (direct `create`/`apply`) keeps a given status, as a test's setup wants."""
        meta = body.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        name = meta.get("name", "")
        if not name:
            raise ApiError(
                422, status_body(422, "Invalid", "metadata.name: Required value: name or generateName is required")
            )
        if rtype.namespaced:
            meta["namespace"] = namespace
        else:
            meta.pop("namespace", None)
        body["apiVersion"] = rtype.api_version
        body["kind"] = rtype.kind
        key = (namespace, name)
        if key in self.store.objects[rtype]:
            message = f'{rtype.qualified} "{name}" already exists'
            details: Obj = {"name": name}
            if rtype.group:
                details["group"] = rtype.group
            details["kind"] = rtype.plural
            raise ApiError(409, status_body(409, "AlreadyExists", message, details))
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = timestamp()
        meta.pop("resourceVersion", None)
        meta.pop("deletionTimestamp", None)
        if rtype.generation:
            meta["generation"] = 1
        given_status = body.pop("status", None)
        if rtype.kind == "Pod" and rtype.group == "":
            self._admit_pod(body)
        if rtype.kind == "Event" and rtype.group == "events.k8s.io":
            _validate_event(rtype, body)
        if isinstance(given_status, dict) and (keep_status or not rtype.status or rtype.kind == "Node"):
            body["status"] = {**body.get("status", {}), **given_status}
        if query.get("dryRun") == "All":
            return ordered(rtype, body)
        return self._commit(rtype, key, body, "ADDED")

    def _admit_pod(self, pod: Obj) -> None:
        """Priority admission, scheduler-name defaulting and the initial status a new pod gets."""
        spec = pod.setdefault("spec", {})
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        classes = self.store.objects[BY_PATH[("scheduling.k8s.io", "v1", "priorityclasses")]]
        chosen: Obj | None = None
        if spec.get("priorityClassName"):
            chosen = classes.get(("", spec["priorityClassName"]))
            if chosen is None:
                message = f'pods "{pod["metadata"]["name"]}" is forbidden: no PriorityClass with name '
                raise ApiError(403, status_body(403, "Forbidden", message + f"{spec['priorityClassName']} was found"))
        else:
            defaults = [pc for pc in classes.values() if pc.get("globalDefault")]
            if defaults:
                chosen = min(defaults, key=lambda pc: int(pc.get("value", 0)))
                spec["priorityClassName"] = chosen["metadata"]["name"]
        spec["priority"] = int(chosen.get("value", 0)) if chosen else 0
        if chosen is not None:
            spec.setdefault("preemptionPolicy", chosen.get("preemptionPolicy", "PreemptLowerPriority"))
        if not spec.get("schedulingGates"):
            spec.pop("schedulingGates", None)
        requests = any(c.get("resources", {}).get("requests") for c in spec.get("containers", []))
        status: Obj = {"phase": "Pending"}
        if spec.get("schedulingGates"):
            status["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "lastProbeTime": None,
                    "lastTransitionTime": timestamp(),
                    "reason": "SchedulingGated",
                    "message": "Scheduling is blocked due to non-empty scheduling gates",
                }
            ]
        status["qosClass"] = "Burstable" if requests else "BestEffort"
        if spec.get("nodeName"):
            status["conditions"] = [_pod_scheduled_true()]
        pod["status"] = status

    def do_get(self, rtype: ResourceType, namespace: str, name: str) -> Obj:
        found = self.store.objects[rtype].get((namespace, name))
        if found is None:
            raise not_found(rtype, name)
        return found

    def do_update(
        self, rtype: ResourceType, namespace: str, name: str, body: Obj, subresource: str, whole: bool
    ) -> Obj:
        """PUT semantics: optimistic concurrency on resourceVersion, status subresource split, validation."""
        old = self.do_get(rtype, namespace, name)
        sent_rv = body.get("metadata", {}).get("resourceVersion")
        if sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
            raise conflict(
                rtype,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            )
        new = copy.deepcopy(body)
        new["apiVersion"] = rtype.api_version
        new["kind"] = rtype.kind
        meta = new.setdefault("metadata", {})
        for kept in ("name", "namespace", "uid", "creationTimestamp", "generation", "deletionTimestamp"):
            if kept in old["metadata"]:
                meta[kept] = old["metadata"][kept]
            else:
                meta.pop(kept, None)
        if rtype.status and not whole:
            if subresource == "status":
                new = {**copy.deepcopy(old), "status": new.get("status", {})}
            else:
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
                else:
                    new.pop("status", None)
        if rtype.kind == "Pod" and rtype.group == "":
            self._validate_pod_update(rtype, old, new)
        if rtype.generation and new.get("spec") != old.get("spec"):
            new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
        new["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if ordered(rtype, new) == old:
            return copy.deepcopy(old)
        if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers") and rtype.kind != "Pod":
            return self._commit(rtype, (namespace, name), new, "DELETED")
        return self._commit(rtype, (namespace, name), new, "MODIFIED")

    def _validate_pod_update(self, rtype: ResourceType, old: Obj, new: Obj) -> None:
        name = old["metadata"]["name"]
        spec = new.setdefault("spec", {})
        old_gates = {g.get("name") for g in old.get("spec", {}).get("schedulingGates", [])}
        for i, gate in enumerate(spec.get("schedulingGates", [])):
            if gate.get("name") not in old_gates:
                raise invalid(
                    rtype,
                    name,
                    f"spec.schedulingGates[{i}].name",
                    "FieldValueForbidden",
                    f"Forbidden: only deletion is allowed, but found new scheduling gate '{gate.get('name')}'",
                )
        if "schedulingGates" in spec and not spec["schedulingGates"]:
            del spec["schedulingGates"]
        if spec.get("nodeName") and new.get("status", {}).get("nominatedNodeName"):
            raise invalid(
                rtype,
                name,
                "status.nominatedNodeName",
                "FieldValueForbidden",
                "Forbidden: may not be set on pods that are already bound to a node",
            )
        old_node = old.get("spec", {}).get("nodeName")
        if old_node and spec.get("nodeName") != old_node:
            raise invalid(
                rtype,
                name,
                "spec",
                "FieldValueForbidden",
                "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, ...",
            )

    def do_patch(
        self, rtype: ResourceType, namespace: str, name: str, content_type: str, patch: Any, subresource: str
    ) -> Obj:
        old = self.do_get(rtype, namespace, name)
        try:
            patched = apply_patch(content_type, copy.deepcopy(old), patch)
        except PatchFailed as exc:
            message = "the server rejected our request due to an error in our request"
            details = {"causes": [{"reason": "UnexpectedServerResponse", "message": str(exc)}]}
            raise ApiError(422, status_body(422, "Invalid", message, details)) from exc
        except BadPatch as exc:
            raise ApiError(400, status_body(400, "BadRequest", str(exc))) from exc
        if patched.get("metadata", {}).get("resourceVersion") == old["metadata"]["resourceVersion"]:
            patched["metadata"].pop("resourceVersion")
        return self.do_update(rtype, namespace, name, patched, subresource, whole=False)

    def do_delete(self, rtype: ResourceType, namespace: str, name: str, options: Obj) -> Obj:
        """Preconditions, then graceful deletion for bound pods and finalizers, immediate removal otherwise."""
        old = self.do_get(rtype, namespace, name)
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
            why = (
                f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: {old['metadata']['uid']}"
            )
            raise conflict(rtype, name, why)
        if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
            why = (
                f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
                f"ResourceVersion in object meta: {old['metadata']['resourceVersion']}"
            )
            raise conflict(rtype, name, why)
        new = copy.deepcopy(old)
        meta = new["metadata"]
        if rtype.kind == "Pod" and rtype.group == "":
            grace = options.get("gracePeriodSeconds")
            if grace is None:
                grace = old["spec"].get("terminationGracePeriodSeconds", 30)
            if not old["spec"].get("nodeName"):
                grace = 0
            current = meta.get("deletionGracePeriodSeconds")
            if current is not None:
                grace = min(int(grace), int(current))
            if int(grace) > 0:
                meta["deletionTimestamp"] = timestamp(datetime.now(UTC) + timedelta(seconds=int(grace)))
                meta["deletionGracePeriodSeconds"] = int(grace)
                self._terminating[(rtype, namespace, name)] = time.monotonic() + self.termination_seconds
                return self._commit(rtype, (namespace, name), new, "MODIFIED")
            self._terminating.pop((rtype, namespace, name), None)
            return self._commit(rtype, (namespace, name), new, "DELETED")
        if meta.get("finalizers"):
            if meta.get("deletionTimestamp"):
                return copy.deepcopy(old)
            meta["deletionTimestamp"] = timestamp()
            meta["deletionGracePeriodSeconds"] = 0
            return self._commit(rtype, (namespace, name), new, "MODIFIED")
        return self._commit(rtype, (namespace, name), new, "DELETED")

    def do_bind(self, namespace: str, name: str, binding: Obj) -> Obj:
        """pods/binding: 409 with the recorded bodies when the pod is bound or still gated."""
        rtype = BY_PATH[("", "v1", "pods")]
        pod = self.do_get(rtype, namespace, name)
        details = {"name": name, "kind": "pods/binding"}
        prefix = f'Operation cannot be fulfilled on pods/binding "{name}": '
        if pod["spec"].get("nodeName"):
            message = prefix + f'pod {name} is already assigned to node "{pod["spec"]["nodeName"]}"'
            raise ApiError(409, status_body(409, "Conflict", message, details))
        if pod["spec"].get("schedulingGates"):
            message = prefix + f"pod {name} has non-empty .spec.schedulingGates"
            raise ApiError(409, status_body(409, "Conflict", message, details))
        if pod["metadata"].get("deletionTimestamp"):
            message = prefix + f"pod {name} is being deleted, cannot be assigned to a host"
            raise ApiError(409, status_body(409, "Conflict", message, details))
        uid = binding.get("metadata", {}).get("uid")
        if uid and uid != pod["metadata"]["uid"]:
            why = f"Precondition failed: UID in precondition: {uid}, UID in object meta: {pod['metadata']['uid']}"
            raise ApiError(409, status_body(409, "Conflict", prefix + why, details))
        node_name = binding.get("target", {}).get("name", "")
        new = copy.deepcopy(pod)
        new["spec"]["nodeName"] = node_name
        node = self.store.objects[BY_PATH[("", "v1", "nodes")]].get(("", node_name))
        zone = (node or {}).get("metadata", {}).get("labels", {}).get(ZONE_LABEL)
        if zone:
            new["metadata"].setdefault("labels", {})[ZONE_LABEL] = zone
        conditions = [c for c in new.setdefault("status", {}).get("conditions", []) if c.get("type") != "PodScheduled"]
        new["status"]["conditions"] = [*conditions, _pod_scheduled_true()]
        new["status"].pop("nominatedNodeName", None)
        self._commit(rtype, (namespace, name), new, "MODIFIED")
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def _reap(self) -> None:
        while not self._stopped.wait(0.02):
            with self.lock:
                if self.hold_terminating:
                    continue
                now = time.monotonic()
                for key in [k for k, due in self._terminating.items() if due <= now]:
                    self._remove_terminating(key)

    def _remove_terminating(self, key: tuple[ResourceType, str, str]) -> None:
        rtype, namespace, name = key
        self._terminating.pop(key, None)
        found = self.store.objects[rtype].get((namespace, name))
        if found is not None:
            self._commit(rtype, (namespace, name), copy.deepcopy(found), "DELETED")

    # watch

    def events_after(self, cursor: int) -> Iterator[WatchEvent]:
        store = self.store
        start = bisect.bisect_right(store.history_rvs, cursor)
        yield from store.history[start:]


def _validate_event(rtype: ResourceType, event: Obj) -> None:
    """kube-apiserver's checks on an events.k8s.io/v1 CREATE (`ValidateEventCreate`, eventTime set).

    An Event lives in a namespace; one about a cluster-scoped object (no `regarding.namespace`) must
    go to `default` or `kube-system`, or the apiserver answers 422.
    """
    name = event["metadata"]["name"]
    namespace = event["metadata"].get("namespace", "")
    regarding = event.get("regarding") or {}
    if not regarding.get("namespace") and namespace not in ("default", "kube-system"):
        detail = f'Invalid value: "{regarding.get("namespace", "")}": does not match event.namespace'
        raise invalid(rtype, name, "involvedObject.namespace", "FieldValueInvalid", detail)
    for key in ("eventTime", "reportingController", "reportingInstance", "action", "reason"):
        if not event.get(key):
            raise invalid(rtype, name, key, "FieldValueRequired", "Required value")
    if event.get("type") not in ("Normal", "Warning"):
        raise invalid(
            rtype, name, "type", "FieldValueInvalid", f'Invalid value: "": has invalid value: {event.get("type")}'
        )
    if len(event.get("note", "")) > 1024:
        raise invalid(rtype, name, "note", "FieldValueInvalid", 'Invalid value: "": can have at most 1024 characters')


def _pod_scheduled_true() -> Obj:
    return {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": timestamp()}


def _matches(obj: Obj, namespace: str, label_selector: str, field_selector: str) -> bool:
    meta = obj.get("metadata", {})
    if namespace and meta.get("namespace") != namespace:
        return False
    labels = meta.get("labels") or {}
    for term in filter(None, label_selector.split(",")):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term.strip() not in labels:
            return False
    for term in filter(None, field_selector.split(",")):
        negate = "!=" in term
        key, value = term.replace("!=", "=").replace("==", "=").split("=", 1)
        current: Any = obj
        for part in key.strip().split("."):
            current = current.get(part) if isinstance(current, dict) else None
        if ((current or "") == value.strip()) == negate:
            return False
    return True


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    """The listen backlog: socketserver's default of 5 drops connections when a scheduler's write workers all
    reconnect at once, after a restart, and each waits out a SYN retransmit (1 s, a test replica's timeout)."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients dropping connections (timeouts, restarts, killed schedulers) are routine here."""


class _Handler(BaseHTTPRequestHandler):
    """Routes REST paths to the store; one instance per connection (HTTP/1.1 keep-alive)."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    api: ApiServer
    generation: int

    def log_message(self, format: str, *args: Any) -> None:
        """Silence per-request stderr lines."""

    def setup(self) -> None:
        super().setup()
        with self.api.lock:
            self.api._connections.add(self.connection)

    def finish(self) -> None:
        with self.api.lock:
            self.api._connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _send(self, code: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body, separators=(",", ":")).encode() + b"\n"
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        parts = urlsplit(self.path)
        path = parts.path
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            self._send(400, status_body(400, "BadRequest", "the request body is not valid JSON"))
            return
        api = self.api
        with api.lock:
            if api.record_requests:
                api.requests.append(Request(method, path, query, body))
            fault = next((f for f in api.faults if f.matches(method, path)), None)
            if fault is not None:
                fault.remaining -= 1
        try:
            if fault is not None and fault.delay_seconds:
                time.sleep(fault.delay_seconds)
            elif fault is not None:
                self._inject(fault, query)
                return
            self._route(method, path, query, body)
        except ApiError as err:
            self._send(err.code, err.body, err.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _inject(self, fault: Fault, query: dict[str, str]) -> None:
        if fault.hang_seconds:
            deadline = time.monotonic() + fault.hang_seconds
            while time.monotonic() < deadline and self.generation == self.api._generation:
                time.sleep(0.01)
            self.close_connection = True
            return
        if fault.status == 410 and fault.body is None and query.get("watch") in ("1", "true"):
            self._start_stream()
            oldest = self.api.store.oldest_rv
            rv = query.get("resourceVersion", "")
            status = status_body(410, "Expired", f"too old resource version: {rv} ({oldest})")
            self._write_event({"type": "ERROR", "object": status})
            self._end_stream()
            return
        headers: dict[str, str] = {}
        if fault.body is not None:
            body = fault.body
        elif fault.status == 429:
            retry = fault.retry_after or 1
            details = {"retryAfterSeconds": retry}
            body = status_body(429, "TooManyRequests", "storage is (re)initializing", details)
        elif fault.status == 410:
            body = status_body(410, "Expired", "The resourceVersion for the provided list is too old.")
        elif fault.status == 504:
            body = status_body(504, "Timeout", "Timeout: request did not complete within requested timeout")
        else:
            body = status_body(fault.status, "InternalError", "Internal error occurred: injected fault")
        if fault.retry_after is not None:
            headers["Retry-After"] = str(fault.retry_after)
        self._send(fault.status, body, headers)

    def _route(self, method: str, path: str, query: dict[str, str], body: Any) -> None:
        segments = [s for s in path.split("/") if s]
        if path in ("/healthz", "/readyz", "/livez"):
            data = b"ok"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if path == "/version":
            self._send(200, VERSION)
            return
        if path == "/apis/authorization.k8s.io/v1/subjectaccessreviews" and method == "POST":
            self._send(201, self.api.review(body if isinstance(body, dict) else {}))
            return
        served = "/".join(["", *segments[:3]])
        if method == "GET" and served in self.api.aggregated:
            self._send(*self.api.aggregated[served](path, query))
            return
        if len(segments) >= 2 and segments[0] == "api":
            group, version, rest = "", segments[1], segments[2:]
        elif len(segments) >= 3 and segments[0] == "apis":
            group, version, rest = segments[1], segments[2], segments[3:]
        else:
            self._send(404, status_body(404, "NotFound", "the server could not find the requested resource"))
            return
        if not rest and method == "GET":
            self._discovery(group, version)
            return
        namespace = ""
        if (
            len(rest) >= 3
            and rest[0] == "namespaces"
            and ((group, version, rest[2]) in BY_PATH or rest[2] == "bindings")
        ):
            namespace, rest = rest[1], rest[2:]
        if group == "" and namespace and rest == ["bindings"] and method == "POST" and isinstance(body, dict):
            with self.api.lock:
                result = self.api.do_bind(namespace, body.get("metadata", {}).get("name", ""), body)
            self._send(201, result)
            return
        rtype = BY_PATH.get((group, version, rest[0])) if rest else None
        if rtype is None:
            self._send(404, status_body(404, "NotFound", "the server could not find the requested resource"))
            return
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        api = self.api
        if not name:
            if method == "GET" and query.get("watch") in ("1", "true"):
                self._watch(rtype, namespace, query)
                return
            if method == "GET":
                self._list(rtype, namespace, query)
                return
            if method == "POST":
                if not isinstance(body, dict):
                    raise ApiError(400, status_body(400, "BadRequest", "the request body must be an object"))
                with api.lock:
                    created = api.do_create(rtype, namespace, body, query)
                self._send(201, created)
                return
            raise ApiError(405, status_body(405, "MethodNotAllowed", f"{method} is not supported on a collection"))
        with api.lock:
            if method == "GET":
                result, code = copy.deepcopy(api.do_get(rtype, namespace, name)), 200
            elif method == "POST" and sub == "binding" and rtype.plural == "pods":
                result, code = api.do_bind(namespace, name, body or {}), 201
            elif method == "POST" and sub == "eviction" and rtype.plural == "pods":
                api.do_delete(rtype, namespace, name, (body or {}).get("deleteOptions") or {})
                result = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
                code = 201
            elif method == "PUT":
                result, code = api.do_update(rtype, namespace, name, body or {}, sub, whole=False), 200
            elif method == "PATCH":
                content_type = self.headers.get("Content-Type", "")
                result, code = api.do_patch(rtype, namespace, name, content_type, body, sub), 200
            elif method == "DELETE":
                options = dict(body or {})
                if "gracePeriodSeconds" in query:
                    options["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
                result, code = api.do_delete(rtype, namespace, name, options), 200
            else:
                raise ApiError(405, status_body(405, "MethodNotAllowed", f"{method} {sub} is not supported"))
        self._send(code, result)

    def _discovery(self, group: str, version: str) -> None:
        """`/api/v1`, `/apis/<group>/<version>`: the APIResourceList of what this server serves there."""
        served = [r for r in RESOURCE_TYPES if (r.group, r.version) == (group, version)]
        if not served:
            self._send(404, status_body(404, "NotFound", "the server could not find the requested resource"))
            return
        resources = [
            {"name": r.plural, "namespaced": r.namespaced, "kind": r.kind, "verbs": ["get", "list", "watch"]}
            for r in served
        ]
        group_version = f"{group}/{version}" if group else version
        listing = {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}
        self._send(200, listing)

    def _list(self, rtype: ResourceType, namespace: str, query: dict[str, str]) -> None:
        api = self.api
        with api.lock:
            rv = query.get("resourceVersion", "")
            if query.get("resourceVersionMatch") == "Exact" and rv and int(rv) < api.store.oldest_rv:
                raise ApiError(
                    410, status_body(410, "Expired", "The resourceVersion for the provided list is too old.")
                )
            items = [
                copy.deepcopy(obj)
                for (ns, _), obj in sorted(api.store.objects[rtype].items())
                if _matches(obj, namespace, query.get("labelSelector", ""), query.get("fieldSelector", ""))
            ]
            list_rv = str(api.store.rv)
        if not rtype.custom:
            for item in items:
                item.pop("kind", None)
                item.pop("apiVersion", None)
            listing: Obj = {
                "kind": f"{rtype.kind}List",
                "apiVersion": rtype.api_version,
                "metadata": {"resourceVersion": list_rv},
                "items": items,
            }
        else:
            listing = {
                "apiVersion": rtype.api_version,
                "items": items,
                "kind": f"{rtype.kind}List",
                "metadata": {"continue": "", "resourceVersion": list_rv},
            }
        self._send(200, listing)

    def _start_stream(self) -> None:
        """Chunked, as kube-apiserver streams a watch, so clients see each event as it is sent."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _write_event(self, event: Obj) -> None:
        self._write_chunk(json.dumps(event, separators=(",", ":")).encode() + b"\n")

    def _bookmark(self, rtype: ResourceType, rv: int, initial_end: bool = False) -> Obj:
        meta: Obj = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        if rtype.custom:
            return {
                "type": "BOOKMARK",
                "object": {"apiVersion": rtype.api_version, "kind": rtype.kind, "metadata": meta},
            }
        obj: Obj = {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta}
        if rtype.kind == "Pod":
            obj.update({"spec": {"containers": None}, "status": {}})
        return {"type": "BOOKMARK", "object": obj}

    def _watch(self, rtype: ResourceType, namespace: str, query: dict[str, str]) -> None:
        """Stream events after resourceVersion; 410 as one ERROR event; BOOKMARKs periodically and at the end."""
        api = self.api
        rv_param = query.get("resourceVersion", "")
        bookmarks = query.get("allowWatchBookmarks") in ("1", "true")
        timeout = float(query.get("timeoutSeconds") or api.watch_timeout_default)
        labels, fields = query.get("labelSelector", ""), query.get("fieldSelector", "")
        deadline = time.monotonic() + timeout
        self._start_stream()
        with api.lock:
            if rv_param in ("", "0"):
                initial = [
                    {"type": "ADDED", "object": copy.deepcopy(obj)}
                    for _, obj in sorted(api.store.objects[rtype].items())
                    if _matches(obj, namespace, labels, fields)
                ]
                cursor = api.store.rv
                if query.get("sendInitialEvents") == "true" and bookmarks:
                    initial.append(self._bookmark(rtype, cursor, initial_end=True))
            elif int(rv_param) < api.store.oldest_rv:
                message = f"too old resource version: {rv_param} ({api.store.oldest_rv})"
                expired = {"type": "ERROR", "object": status_body(410, "Expired", message)}
                initial, cursor = [expired], -1
            else:
                initial, cursor = [], int(rv_param)
        if initial:
            self._write_chunk(b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in initial))
        if cursor >= 0:
            self._stream_events(rtype, namespace, query, cursor, deadline)
        if self.generation == api._generation:
            self._end_stream()

    def _stream_events(
        self, rtype: ResourceType, namespace: str, query: dict[str, str], cursor: int, deadline: float
    ) -> None:
        api = self.api
        bookmarks = query.get("allowWatchBookmarks") in ("1", "true")
        labels, fields = query.get("labelSelector", ""), query.get("fieldSelector", "")
        last_bookmark = time.monotonic()
        while self.generation == api._generation and not api._stopped.is_set():
            now = time.monotonic()
            if now >= deadline:
                if bookmarks:
                    with api.lock:
                        final = api.store.rv
                    self._write_event(self._bookmark(rtype, final))
                    self._write_event(self._bookmark(rtype, final))
                return
            with api.lock:
                if cursor < api.store.oldest_rv:
                    message = f"too old resource version: {cursor} ({api.store.oldest_rv})"
                    out = [{"type": "ERROR", "object": status_body(410, "Expired", message)}]
                    cursor = -1
                else:
                    out = [
                        {"type": ev.type, "object": ev.obj}
                        for ev in api.events_after(cursor)
                        if ev.rtype is rtype and _matches(ev.obj, namespace, labels, fields)
                    ]
                    cursor = api.store.rv
                if not out and cursor >= 0:
                    if bookmarks and now - last_bookmark >= api.bookmark_interval:
                        out = [self._bookmark(rtype, cursor)]
                        last_bookmark = now
                    else:
                        api.lock.wait(min(0.1, max(0.0, deadline - now)))
                        continue
            if out:
                self._write_chunk(b"".join(json.dumps(e, separators=(",", ":")).encode() + b"\n" for e in out))
            if cursor < 0:
                return
