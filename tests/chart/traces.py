"""Each component of the rendered chart, run against the loopback API server, and the requests it sent.

A component is one container of a Deployment or Job: its ServiceAccount, its `phalanx` arguments, its
environment and the ConfigMap files mounted into it. The loopback server is seeded with the chart's own
objects (the kinds it serves: webhook configurations, ConfigMaps, PDBs, ...), then a scenario per
subcommand drives the real code on the real client until every API call its modules can make
(`api_calls.unexercised`) has been sent, or a deadline passes (the coverage test then names what was
missed). The test code itself only reads and writes the server's storage directly, never over HTTP, so
`server.requests` is what the component asked for.

- `scheduler`: `SchedulerProcess` with the chart's configuration (names, gate, leader election), but
  fast timings and no min-runtime protection; a gated gang that fits (its gate removal gets one 422,
  so the pod is re-read), a gated gang that preempts four victims, a pod that fits nowhere, a PodGroup
  status write that gets one 409 (so the group is re-read), and two pods with WaitForFirstConsumer claims:
  one given a local volume, one whose claim is to be provisioned (nothing binds them here, so their
  Bindings wait). Stopping releases the Lease. Where the chart serves the explain API, it is served too, and asked
  for a namespace's pending work as the front proxy asks (its trust read from kube-system, a review made).
- `webhook`: what `phalanx webhook` starts: the certificate controller when the environment asks for
  it (then a second sync after the Secret was emptied, which replaces it) and the lookup caches, with a
  miss on every lookup (a direct read).
- `certs`: the command line itself (`phalanx certs --uninstall ...` is the pre-delete hook).
- `explain`, `status`: `kubectl phalanx`, which people run under the chart's viewer ClusterRole (`viewers`):
  a gang, a lone pod, native and our PodGroups, a Queue and a PDB explained and listed, a namespace that
  does not exist asked about; the scheduler's ConfigMap is the chart's own. Where the chart registers the explain
  API (its APIService is stored), the loopback server answers it as kube-apiserver would proxy it to the scheduler
  (`scheduler.serve`'s routes and answers on what it stores).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import urllib3

from phalanx.cli import main
from scheduler.api.config import MinRuntimeDefaults
from scheduler.api.pod_group import API_VERSION, NATIVE_API_VERSION
from tests.apiserver.resources import RESOURCE_TYPES
from tests.apiserver.server import ApiServer, Request
from tests.builders import (
    make_claim,
    make_node,
    make_pod,
    make_podgroup,
    make_priority_class,
    make_queue,
    make_storage_class,
    make_volume,
)
from tests.chart.api_calls import CallSite, call_sites_of, command_module, unexercised
from tests.kube.replica import fast_config
from tests.kube.stored import stored_objects
from tests.serve.pki import PROXY, authority, front_proxy_config_map, serving

Doc = dict[str, Any]
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "Job")
SERVED = {(r.api_version, r.kind) for r in RESOURCE_TYPES}
DEADLINE_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class Component:
    workload: str
    namespace: str
    service_account: str
    args: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    files: tuple[tuple[str, str], ...]

    @property
    def command(self) -> str:
        return self.args[0] if self.args else ""

    def __str__(self) -> str:
        return f"{self.workload} running phalanx {self.command}"


def _mounted_files(docs: list[Doc], namespace: str, pod: Doc, container: Doc) -> dict[str, str]:
    """Container path -> content, for every ConfigMap key mounted into the container."""
    volumes = {v["name"]: v for v in pod.get("volumes") or []}
    files = {}
    for mount in container.get("volumeMounts") or []:
        source = volumes[mount["name"]].get("configMap")
        if source is None:
            continue
        (config_map,) = [
            d
            for d in docs
            if d["kind"] == "ConfigMap"
            and d["metadata"]["name"] == source["name"]
            and d["metadata"].get("namespace", namespace) == namespace
        ]
        items = source.get("items") or [{"key": k, "path": k} for k in config_map.get("data") or {}]
        for item in items:
            if "subPath" in mount:
                if mount["subPath"] == item["path"]:
                    files[mount["mountPath"]] = config_map["data"][item["key"]]
            else:
                files[str(PurePosixPath(mount["mountPath"]) / item["path"])] = config_map["data"][item["key"]]
    return files


def components(docs: list[Doc]) -> list[Component]:
    found = []
    for doc in docs:
        if doc["kind"] not in WORKLOAD_KINDS:
            continue
        namespace = doc["metadata"]["namespace"]
        pod = doc["spec"]["template"]["spec"]
        for container in [*(pod.get("initContainers") or []), *pod["containers"]]:
            found.append(
                Component(
                    workload=f"{doc['kind']}/{doc['metadata']['name']}",
                    namespace=namespace,
                    service_account=pod.get("serviceAccountName", "default"),
                    args=tuple(container.get("args") or ()),
                    env=tuple((e["name"], e["value"]) for e in container.get("env") or [] if "value" in e),
                    files=tuple(sorted(_mounted_files(docs, namespace, pod, container).items())),
                )
            )
    return found


VIEWER = "viewer"
"""The `app.kubernetes.io/component` of the chart's ClusterRole for people: what `kubectl phalanx` reads."""


def viewers(docs: list[Doc]) -> list[Component]:
    """`kubectl phalanx explain` and `status`, as run under each viewer ClusterRole (by people, not a pod)."""
    roles = [
        d
        for d in docs
        if d["kind"] == "ClusterRole" and d["metadata"].get("labels", {}).get("app.kubernetes.io/component") == VIEWER
    ]
    return [
        Component(f"ClusterRole/{role['metadata']['name']}", "", "", (command,), (), ())
        for role in roles
        for command in ("explain", "status")
    ]


def served_objects(docs: list[Doc]) -> list[Doc]:
    """The rendered objects the loopback server can store: the cluster right after `helm install`."""
    return [d for d in docs if (d["apiVersion"], d["kind"]) in SERVED]


def parse_args(args: tuple[str, ...] | list[str]) -> argparse.Namespace:
    """The arguments as the `phalanx` CLI parses them."""
    parser = argparse.ArgumentParser(prog="phalanx", exit_on_error=False)
    importlib.import_module(command_module(args[0])).register(parser.add_subparsers(dest="command"))
    return parser.parse_args(list(args))


def snapshot(server: ApiServer) -> list[Request]:
    with server.lock:
        return list(server.requests)


def watched(server: ApiServer) -> set[str]:
    """The paths a watch was opened on."""
    return {r.path for r in snapshot(server) if r.query.get("watch") in ("1", "true")}


def wait_until_exercised(server: ApiServer, sites: list[CallSite], deadline: float, *paths: str) -> None:
    """Until every one of `sites` was sent at least once, and a request went to each of `paths` (or the deadline).

    `paths` name what one call site reaches on several resources (a PodGroup of ours and a native one).
    """

    def pending() -> bool:
        requests = snapshot(server)
        sent = {r.path for r in requests}
        return bool(unexercised(sites, requests)) or any(p not in sent for p in paths)

    while time.monotonic() < deadline and pending():
        time.sleep(0.05)


# scheduler


def _scheduler(component: Component, server: ApiServer, workdir: Path) -> None:
    from kube.client import api_client
    from phalanx.commands.scheduler import load_config
    from scheduler.cluster.kube.process import SchedulerProcess

    args = parse_args(component.args)
    config_path = workdir / "config.yaml"
    config_path.write_text(dict(component.files)[args.config])
    config = load_config(str(config_path))
    fast = fast_config(leader_elect=config.leader_election.leader_elect)
    election = fast.leader_election.model_copy(
        update={
            "resource_name": config.leader_election.resource_name,
            "resource_namespace": config.leader_election.resource_namespace,
        }
    )
    config = config.model_copy(
        update={
            "backoff_seconds": fast.backoff_seconds,
            "max_backoff_seconds": fast.max_backoff_seconds,
            "leader_election": election,
            "min_runtime": MinRuntimeDefaults(),
        }
    )

    def pod(name: str) -> Any:
        return make_pod(name).scheduler(config.scheduler_name)

    server.create(make_priority_class("low", 100).json())
    server.create(make_priority_class("high", 10000).json())
    for i in range(2):
        server.create(make_node(f"n{i}").cap(cpu="4", memory="8Gi").json())
        for j in range(2):
            server.create(pod(f"low-{i}-{j}").req(cpu="2").priority_class("low").on(f"n{i}").grace(5).json())
    server.create(make_node("n2").cap(cpu="2", memory="8Gi").json())
    server.create(make_podgroup("train").gang(2).priority_class("high").priority(10000).json())
    for i in range(2):
        server.create(pod(f"hi-{i}").req(cpu="4").group("train").priority_class("high").gate(config.gate_name).json())
    server.create(make_podgroup("solo").gang(1).json())
    server.create(pod("g0").req(cpu="1").group("solo").gate(config.gate_name).json())
    server.create(pod("big").req(cpu="64").json())
    server.create(make_podgroup("native").native().gang(1).json())
    server.create(pod("n0").req(cpu="1").scheduling_group("native").gate(config.gate_name).json())
    # a node of their own (tainted: the gangs above keep to theirs) for two pods with WaitForFirstConsumer claims
    server.create(make_node("v0").cap(cpu="4", memory="8Gi").label("kubernetes.io/hostname", "v0").taint("vol").json())
    server.create(make_storage_class("local").wait_for_first_consumer().json())
    server.create(make_storage_class("lazy", "ebs.csi.aws.com").wait_for_first_consumer().json())
    server.create(make_volume("local-v0").local_to("v0").storage_class("local").json())
    for name, storage_class in (("static", "local"), ("lazy", "lazy")):
        server.create(make_claim(name).storage_class(storage_class).json())
        held = pod(f"vol-{name}").req(cpu="1").claim(name).toleration("vol", operator="Exists")
        server.create(held.node_selector(**{"kubernetes.io/hostname": "v0"}).json())
    # a node of its own (tainted) whose one device a pod's ResourceClaim is given (DynamicResources' PreBind)
    server.create(make_node("d0").cap(cpu="4", memory="8Gi").taint("dra").json())
    driver = {"apiVersion": "resource.k8s.io/v1"}
    server.create({**driver, "kind": "DeviceClass", "metadata": {"name": "gpu"}, "spec": {}})
    pool = {"name": "d0", "generation": 1, "resourceSliceCount": 1}
    spec = {"driver": "gpu.example.com", "nodeName": "d0", "pool": pool, "devices": [{"name": "gpu-0"}]}
    server.create({**driver, "kind": "ResourceSlice", "metadata": {"name": "d0-gpu"}, "spec": spec})
    requests = [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]
    claim = {"metadata": {"name": "gpu", "namespace": "default"}, "spec": {"devices": {"requests": requests}}}
    server.create({**driver, "kind": "ResourceClaim", **claim})
    server.create(pod("dra").req(cpu="1").named_claim("gpu", "gpu").toleration("dra", operator="Exists").json())
    server.fail("PATCH", "/api/v1/namespaces/default/pods/g0", 422)
    server.fail("PATCH", f"/apis/{API_VERSION}/namespaces/default/podgroups/solo/status", 409)
    server.fail("PATCH", f"/apis/{NATIVE_API_VERSION}/namespaces/default/podgroups/native/status", 409)

    process = SchedulerProcess(
        api_client(server.kubeconfig(workdir / "kubeconfig"), "scheduler"),
        config,
        lease_namespace=component.namespace,  # $POD_NAMESPACE, the command's default
        idle_seconds=1.0,
        watch_timeout_seconds=30,
        request_timeout_seconds=1.0,
    )
    # Scan the code before the scheduler's threads start: CPython 3.11's `ast.parse` is not safe beside
    # other threads ("SystemError: AST constructor recursion depth mismatch", python/cpython#106905).
    sites = call_sites_of(component.command)
    stop = threading.Event()
    thread = threading.Thread(target=process.run, args=(stop,), name="traced-scheduler", daemon=True)
    thread.start()
    explain_api = _explain_api(args, process, server, workdir) if args.explain_bind else None
    try:
        native = f"/apis/{NATIVE_API_VERSION}/namespaces/default/podgroups/native"
        ours = f"/apis/{API_VERSION}/namespaces/default/podgroups/solo"
        paths = (native, f"{native}/status", ours, f"{ours}/status")
        deadline = time.monotonic() + DEADLINE_SECONDS
        wait_until_exercised(server, sites, deadline, *paths)
        # One call site lists and watches every custom resource: wait for each informer's watch too (under load,
        # the native PodGroups' could open after everything else was exercised, and its grant looked unused).
        while time.monotonic() < deadline and len(watched(server)) < len(process.cluster.informers):
            time.sleep(0.05)
    finally:
        if explain_api is not None:
            explain_api.stop()
        stop.set()
        thread.join(timeout=10)


def _explain_api(args: argparse.Namespace, process: Any, server: ApiServer, workdir: Path) -> Any:
    """The explain API the chart's arguments ask for, served on loopback with certificates made here, and asked
    for a namespace's pending work as kube-apiserver's front proxy would ask it (its trust read, a review made),
    again while the answer is 503 (the caches not synced yet: the limits and the review come after that check)."""
    from phalanx.commands.scheduler import serve_explanations

    proxy = authority("front-proxy-ca")
    server.create(front_proxy_config_map(proxy))
    server.allow("viewer", "list", "explain.phalanx.dev", "pendingwork", "default")
    files = serving(workdir / "serving", "127.0.0.1")
    args.explain_bind, args.kubeconfig = "127.0.0.1:0", str(workdir / "kubeconfig")
    args.tls_cert_file, args.tls_private_key_file = str(files.cert_file), str(files.key_file)
    explain_api = serve_explanations(args, process)
    client = proxy.client(PROXY, workdir / "front-proxy")
    pool = urllib3.PoolManager(
        ca_certs=str(files.ca_file), cert_file=str(client.cert_file), key_file=str(client.key_file)
    )
    url = f"https://127.0.0.1:{explain_api.server_address[1]}/apis/explain.phalanx.dev/v1alpha1/namespaces/default"
    deadline = time.monotonic() + DEADLINE_SECONDS
    while time.monotonic() < deadline:  # 503 until the caches are synced, and no review is asked before that
        viewer = {"X-Remote-User": "viewer"}
        answer = pool.request("GET", f"{url}/pendingwork", headers=viewer, timeout=30, retries=False)
        if answer.status != 503:
            break
        time.sleep(0.1)
    return explain_api


# webhook


def _webhook(component: Component, server: ApiServer, workdir: Path) -> None:
    from kube.client import api_client
    from phalanx.commands.webhook import _start_certificate_controller
    from webhook.lookups import KubeLookups

    args = parse_args([*component.args, f"--kubeconfig={server.kubeconfig(workdir / 'kubeconfig')}"])
    args.tls_cert_file, args.tls_private_key_file = str(workdir / "certs/tls.crt"), str(workdir / "certs/tls.key")
    with pytest.MonkeyPatch.context() as patch:
        for name, value in component.env:
            patch.setenv(name, value)
        controller = _start_certificate_controller(args)
    lookups = KubeLookups(api_client(args.kubeconfig, "webhook")).start()
    try:
        assert lookups.wait_synced(10), "the webhook's caches did not sync"
        # A miss on every lookup is read from the API.
        lookups.priority_class("absent")
        lookups.queue("absent")
        for api_version in (API_VERSION, NATIVE_API_VERSION):
            lookups.workload(api_version, "default", "absent")
            lookups.pod_group(api_version, "default", "absent")
        if controller is not None:
            settings = controller.settings
            secret = server.get("secrets", settings.secret_name, settings.namespace)
            assert secret is not None, "the certificate controller made no Secret"
            server.apply({**secret, "data": {}})  # emptied by hand: the next sync replaces it
            controller.sync()

        deadline = time.monotonic() + DEADLINE_SECONDS
        while time.monotonic() < deadline and len(watched(server)) < len(lookups.informers):
            time.sleep(0.05)
    finally:
        lookups.stop(timeout=0.0)  # threads blocked on a watch end when the server stops
        if controller is not None:
            controller.stop()


# certs (the pre-delete hook)


def _certs(component: Component, server: ApiServer, workdir: Path) -> None:
    kubeconfig = server.kubeconfig(workdir / "kubeconfig")
    with contextlib.redirect_stdout(io.StringIO()):
        status = main([*component.args, f"--kubeconfig={kubeconfig}", f"--out-dir={workdir / 'out'}"])
    assert status == 0, f"phalanx {' '.join(component.args)} exited {status}"


# kubectl phalanx


def _plugin(component: Component, server: ApiServer, workdir: Path) -> None:
    """`kubectl phalanx explain|status` on a small cluster; every call must succeed or fail as kubectl would."""
    server.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    server.create(make_priority_class("low", 10).json())
    server.create(make_priority_class("high", 1000).json())
    server.create(make_node("n0").cap(cpu="4", memory="8Gi").json())
    server.create(make_pod("busy").req(cpu="4").priority_class("low").priority(10).on("n0").json())
    server.create(make_podgroup("train").gang(2).priority_class("high").priority(1000).queue("research").json())
    for i in range(2):
        server.create(make_pod(f"w{i}").req(cpu="2").group("train").priority_class("high").priority(1000).json())
    server.create(make_podgroup("native").native().gang(1).json())
    server.create(make_pod("n0").req(cpu="1").scheduling_group("native").json())
    server.create(make_queue("research").json())
    server.create(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "busy", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "busy"}}},
        }
    )
    kubeconfig = str(server.kubeconfig(workdir / "kubeconfig"))
    if server.get("apiservices", "v1alpha1.explain.phalanx.dev", group="apiregistration.k8s.io") is not None:
        server.aggregated["/apis/explain.phalanx.dev/v1alpha1"] = explain_api_of(server)
    runs = {
        "explain": [(["explain", "podgroup", "train", "-n", "default"], 0), (["explain", "pod", "x", "-n", "nope"], 1)],
        "status": [(["status", "-A"], 0), (["status", "-n", "default", "-o", "json"], 0)],
    }[component.command]
    for args, want in runs:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            status = main([*args, f"--kubeconfig={kubeconfig}"])
        assert status == want, f"phalanx {' '.join(args)} exited {status}: {err.getvalue()}"


def explain_api_of(server: ApiServer) -> Callable[[str, dict[str, str]], tuple[int, dict[str, Any]]]:
    """The scheduler's explain API as kube-apiserver would reach it through the chart's APIService: its routes and
    answers, on what the loopback server stores (authorization is the API server's and the scheduler's own, and the
    requests' grants are what this trace checks)."""
    from scheduler.api.config import SchedulerConfiguration
    from scheduler.serve.answers import Answers, Replica, Seen, status
    from scheduler.serve.routes import Discovery, Explain, parse

    def seen() -> Seen:
        return Seen(stored_objects(server), str(server.resource_version()))

    answers = Answers(seen, SchedulerConfiguration(), lambda: Replica("traced", True))

    def handle(path: str, query: dict[str, str]) -> tuple[int, dict[str, Any]]:
        asked = parse(path, query)
        if asked is None:
            return 404, status(404, "NotFound", "the server could not find the requested resource")
        if isinstance(asked, Discovery):
            return 200, asked.document
        answer = answers.explanation(asked) if isinstance(asked, Explain) else answers.pending(asked)
        return answer.code, answer.body

    return handle


SCENARIOS: dict[str, Callable[[Component, ApiServer, Path], None]] = {
    "scheduler": _scheduler,
    "webhook": _webhook,
    "certs": _certs,
    "explain": _plugin,
    "status": _plugin,
}


class Traces:
    """The requests each component sends, recorded once per (component, seeded objects)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._recorded: dict[tuple[Component, str], list[Request]] = {}

    def requests(self, component: Component, cluster: list[Doc]) -> list[Request]:
        key = (component, json.dumps(cluster, sort_keys=True))
        if key not in self._recorded:
            self._recorded[key] = self._record(component, cluster)
        return self._recorded[key]

    def _record(self, component: Component, cluster: list[Doc]) -> list[Request]:
        scenario = SCENARIOS.get(component.command)
        if scenario is None:
            raise AssertionError(f"{component}: no scenario drives `phalanx {component.command}`; add one to SCENARIOS")
        workdir = Path(tempfile.mkdtemp(prefix="trace-", dir=self.workdir))  # unique, also after a failed trace
        server = ApiServer(bookmark_interval=0.5).start()
        try:
            for obj in cluster:
                server.create(obj)
            scenario(component, server, workdir)
            return snapshot(server)
        finally:
            server.stop()
