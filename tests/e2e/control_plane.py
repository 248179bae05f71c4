"""The real control plane of `../shared/kube` (kube-apiserver 1.36.2, etcd, controller manager) for one test session.

`up.sh` starts it in a temporary folder, with an audit log of every request the unprivileged `user`
identity makes (our components run as that user): the RBAC test reads it to prove each grant is used
and none is missing. `Api` is a small REST client for the tests themselves, with the admin token: it
returns status and body instead of raising, so a test can assert on a refusal as easily as on a success.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3

ROOT = Path(__file__).resolve().parents[2]
KUBE = ROOT.parent / "shared" / "kube"

AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    users: [user]
  - level: None
"""

Json = dict[str, Any]
DECISION = "authorization.k8s.io/decision"


def available() -> bool:
    return (KUBE / "up.sh").exists()


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: Json
    warnings: tuple[str, ...] = ()
    """Admission warnings (the `Warning:` headers kubectl prints)."""

    @property
    def message(self) -> str:
        return str(self.body.get("message", ""))


class Api:
    """kube-apiserver over HTTPS with a bearer token; JSON in, `Response` out."""

    def __init__(self, url: str, token: str, ca_file: str, impersonate: str | None = None) -> None:
        self.url = url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        if impersonate is not None:
            self._headers["Impersonate-User"] = impersonate
        context = ssl.create_default_context(cafile=ca_file)
        self._pool = urllib3.PoolManager(ssl_context=context, maxsize=8, retries=False, timeout=30.0)

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Response:
        headers = dict(self._headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        reply = self._pool.request(method, self.url + path, body=data, headers=headers)
        text = reply.data.decode()
        body = json.loads(text) if text.strip().startswith("{") else {"message": text}
        warnings = tuple(w.split(" ", 2)[-1].strip('"') for w in reply.headers.getlist("Warning"))
        return Response(reply.status, body, warnings)

    def get(self, path: str) -> Json | None:
        reply = self.request("GET", path)
        if reply.status == 404:
            return None
        assert reply.status == 200, f"GET {path}: {reply.status} {reply.message}"
        return reply.body

    def items(self, path: str, **query: str) -> list[Json]:
        suffix = f"?{urllib.parse.urlencode(query)}" if query else ""
        found = self.get(path + suffix)
        return list(found["items"]) if found else []

    def create(self, path: str, body: Json) -> Json:
        reply = self.request("POST", path, body)
        assert reply.status in (200, 201), f"POST {path}: {reply.status} {reply.message}"
        return reply.body

    def apply(self, body: Json) -> Json:
        """Create, or replace when it exists (kubectl apply for the tests' own set-up)."""
        path = collection_path(body)
        reply = self.request("POST", path, body)
        if reply.status == 409:
            current = self.get(object_path(body))
            assert current is not None
            body = {**body, "metadata": {**body["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}}
            reply = self.request("PUT", object_path(body), body)
        assert reply.status in (200, 201), f"apply {path}: {reply.status} {reply.message}"
        return reply.body

    def patch(self, path: str, body: Any, content_type: str = "application/merge-patch+json") -> Response:
        return self.request("PATCH", path, body, content_type)

    def watch(self, path: str, resource_version: str, timeout_seconds: int = 60) -> Iterator[Json]:
        """Watch events (`{"type", "object"}`) of a collection from `resource_version`, until the server ends it."""
        separator = "&" if "?" in path else "?"
        query = urllib.parse.urlencode(
            {
                "watch": "1",
                "allowWatchBookmarks": "true",
                "resourceVersion": resource_version,
                "timeoutSeconds": str(timeout_seconds),
            }
        )
        reply = self._pool.request(
            "GET",
            f"{self.url}{path}{separator}{query}",
            headers=self._headers,
            preload_content=False,
            timeout=urllib3.Timeout(connect=10, read=timeout_seconds + 10),
        )
        try:
            if reply.status != 200:
                raise RuntimeError(f"watch {path}: {reply.status} {reply.data.decode(errors='replace')[:300]}")
            pending = b""
            for chunk in reply.stream(65536):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                yield from (json.loads(line) for line in lines if line.strip())
        finally:
            reply.release_conn()

    def delete(self, path: str, grace_period_seconds: int | None = None, uid: str | None = None) -> Response:
        options: Json = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        return self.request("DELETE", path, options)


API_PATHS = {
    "v1": "/api/v1",
}


def _prefix(api_version: str) -> str:
    return API_PATHS.get(api_version, f"/apis/{api_version}")


CLUSTER_SCOPED = {
    "Namespace",
    "Node",
    "PersistentVolume",
    "StorageClass",
    "CSINode",
    "CSIDriver",
    "PriorityClass",
    "Queue",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "APIService",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "DeviceClass",
    "ResourceSlice",
}


def plural(kind: str) -> str:
    lower = kind.lower()
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    return lower + ("es" if lower.endswith("s") else "s")


def collection_path(obj: Json) -> str:
    prefix = _prefix(obj["apiVersion"])
    kind = obj["kind"]
    if kind in CLUSTER_SCOPED:
        return f"{prefix}/{plural(kind)}"
    namespace = obj["metadata"].get("namespace", "default")
    return f"{prefix}/namespaces/{namespace}/{plural(kind)}"


def object_path(obj: Json) -> str:
    return f"{collection_path(obj)}/{obj['metadata']['name']}"


class ControlPlane:
    """One started `up.sh` folder: its settings, clients for admin and user, and the audit log.

    `kube_scheduler` also starts kube-scheduler (for pods of the default scheduler, such as the chart's own);
    `aggregator_routing` makes the API server call webhooks at their Service's endpoints, as in a cluster
    whose API server cannot reach Service IPs.
    """

    def __init__(self, directory: Path, kube_scheduler: bool = False, aggregator_routing: bool = False) -> None:
        self.dir = directory
        self.env: dict[str, str] = {}
        self.kube_scheduler = kube_scheduler
        self.aggregator_routing = aggregator_routing

    def start(self) -> ControlPlane:
        policy = self.dir / "audit-policy.yaml"
        self.dir.mkdir(parents=True, exist_ok=True)
        policy.write_text(AUDIT_POLICY)
        args = f"--audit-policy-file={policy} --audit-log-path={self.audit_log} --audit-log-maxsize=200"
        if self.aggregator_routing:
            args += " --enable-aggregator-routing=true"
        env = {**os.environ, "KUBE_OWNER_PID": str(os.getpid()), "KUBE_APISERVER_ARGS": args}
        if self.kube_scheduler:
            env["KUBE_SCHEDULER"] = "1"
        done = subprocess.run(
            [str(KUBE / "up.sh"), str(self.dir)], capture_output=True, text=True, env=env, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"../shared/kube/up.sh failed ({done.returncode}): {done.stderr[-2000:]}")
        self.env = json.loads((self.dir / "env.json").read_text())
        return self

    def stop(self) -> None:
        subprocess.run([str(KUBE / "down.sh"), str(self.dir)], capture_output=True, check=False)

    @property
    def audit_log(self) -> Path:
        return self.dir / "logs" / "audit.log"

    @property
    def admin_kubeconfig(self) -> Path:
        return Path(self.env["KUBECONFIG"])

    @property
    def user_kubeconfig(self) -> Path:
        return Path(self.env["KUBE_USER_KUBECONFIG"])

    @property
    def user_token(self) -> str:
        return self.env["KUBE_USER_TOKEN"]

    def api(self, user: str = "admin") -> Api:
        token = self.env["KUBE_ADMIN_TOKEN"] if user == "admin" else self.env["KUBE_USER_TOKEN"]
        return Api(self.env["KUBE_APISERVER_URL"], token, self.env["KUBE_CA_FILE"])

    def api_impersonating(self, user: str) -> Api:
        """Requests as any user name, through the admin's right to impersonate: an identity with no grants until a
        test binds it some (the audit log, which records `user` only, does not see it)."""
        return Api(self.env["KUBE_APISERVER_URL"], self.env["KUBE_ADMIN_TOKEN"], self.env["KUBE_CA_FILE"], user)

    def audit_events(self) -> Iterator[Json]:
        """What the unprivileged `user` asked (the only identity the audit policy records), and the answer."""
        if not self.audit_log.exists():
            return
        with self.audit_log.open() as lines:
            for line in lines:
                if line.strip():
                    yield json.loads(line)

    def authorized(self, decision: str) -> list[Json]:
        """Audit events of `user` the RBAC authorizer decided so: `allow` or `forbid` (admission refusals are not
        authorization: a write into a namespace being deleted is a 403 too, and was allowed by RBAC)."""
        return [e for e in self.audit_events() if e.get("annotations", {}).get(DECISION) == decision]

    def refused(self, code: int, namespace: str | None = None) -> list[str]:
        """`verb resource/subresource namespace/name: message` of each request of `user` answered with `code`."""
        found = []
        for event in self.audit_events():
            status = event.get("responseStatus", {})
            ref = event.get("objectRef", {})
            if status.get("code") != code or (namespace is not None and ref.get("namespace") != namespace):
                continue
            resource = "/".join(filter(None, (ref.get("resource"), ref.get("subresource"))))
            where = f"{ref.get('namespace', '')}/{ref.get('name', '')}"
            found.append(f"{event['verb']} {resource} {where}: {status.get('message', '')}")
        return found
