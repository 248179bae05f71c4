"""Phalanx as a user installs it: `helm install`, the chart's pods running, failover, rotation, upgrade, uninstall.

The steps run in order on one release in the `cluster` fixture's control plane, whose node `runner-0` runs
the chart's pods as processes from the project's image (`tests/e2e/podrunner`). kube-scheduler places them;
the API server calls the webhook through its Service's EndpointSlice and verifies TLS against the
Service's name, with the caBundle the chart's own certificate mechanism injected. Workload pods go to
fake nodes of a `Pool` (nothing runs them), as in the rest of the suite. Each step records how long it
took; `make test` prints the figures at the end of the run.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from tests.chart.conftest import CHART, HELM_4, IMAGE_REPOSITORY, Helm, _extract_helm
from tests.e2e.control_plane import ROOT, Api, ControlPlane, Json
from tests.e2e.objects import GATE, PHALANX, SCHEDULER_NAME, Pool
from tests.e2e.runner import PodRunner
from tests.e2e.stream import AdmissionStream
from tests.e2e.timings import TIMINGS
from tests.polling import wait_for

RELEASE = "phalanx"
NAMESPACE = "phalanx-system"
SERVICE = "phalanx-webhook"
WEBHOOK_CONFIGURATIONS = (
    "mutatingwebhookconfigurations/phalanx-mutating",
    "validatingwebhookconfigurations/phalanx-validating",
)
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/phalanx-scheduler"
TLS_SECRET = f"/api/v1/namespaces/{NAMESPACE}/secrets/phalanx-webhook-tls"
PUBLISHED_IN_EVERY_NAMESPACE = ("default", "kube-root-ca.crt", "openshift-service-ca.crt")
"""The ServiceAccount and the CA ConfigMaps the controller manager makes in each namespace: not the release's."""


@dataclass(slots=True)
class Release:
    """The chart as installed in `cluster`, with the views the steps check."""

    plane: ControlPlane
    helm: Helm
    runner: PodRunner
    api: Api = field(init=False)

    def __post_init__(self) -> None:
        self.api = self.plane.api()

    def helm_run(self, *args: str, timeout: float = 180) -> float:
        started = time.monotonic()
        done = self.helm.run(*args, "--namespace", NAMESPACE, timeout=timeout)
        assert done.returncode == 0, f"helm {args[0]} failed:\n{done.stderr[-3000:]}\n{self.diagnose()}"
        return time.monotonic() - started

    def install(self, *extra: str, helm: Helm | None = None) -> float:
        """README's `helm install`, naming the image its build step tags, which the pod runner runs."""
        chosen = helm or self.helm
        started = time.monotonic()
        image = ("--set", f"image.repository={IMAGE_REPOSITORY}", "--set", f"image.tag={version('phalanx')}")
        done = chosen.run(
            "install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--wait", "--timeout", "3m", *image, *extra
        )
        assert done.returncode == 0, f"helm install failed:\n{done.stderr[-3000:]}\n{self.diagnose()}"
        return time.monotonic() - started

    def upgrade(self, *values: str) -> float:
        """`helm upgrade --reuse-values` with `--set-json` values (fractions stay numbers, as in a values file)."""
        sets = [arg for value in values for arg in ("--set-json", value)]
        return self.helm_run("upgrade", RELEASE, str(CHART), "--reuse-values", "--wait", "--timeout", "3m", *sets)

    def pods(self, component: str) -> list[Json]:
        """The component's pods that are Ready and not terminating."""
        selector = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component={component}"
        pods = self.api.items(f"/api/v1/namespaces/{NAMESPACE}/pods", labelSelector=selector)
        return [p for p in pods if _ready(p) and not p["metadata"].get("deletionTimestamp")]

    def lease_holder(self) -> str:
        lease = self.api.get(LEASE)
        return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")

    def ca_bundles(self) -> set[str]:
        """The caBundle of every webhook of both configurations."""
        bundles = set()
        for config in WEBHOOK_CONFIGURATIONS:
            found = self.api.get(f"/apis/admissionregistration.k8s.io/v1/{config}") or {"webhooks": []}
            bundles |= {h["clientConfig"].get("caBundle", "") for h in found["webhooks"]}
        return bundles

    def webhook_errors(self) -> str:
        """Error lines of every webhook pod this runner ran, deleted ones included: why an admission failed."""
        lines = []
        for log in sorted(self.runner.state.glob("pods/*/webhook.log")):
            lines += [
                f"{log.parent.name[:8]}: {line[:600]}"
                for line in log.read_text(errors="replace").splitlines()
                if '"error"' in line or "Traceback" in line or "Error" in line
            ]
        return "\n".join(lines[-40:])

    def log_path(self, pod: Json) -> Path:
        """The log of the pod's container, named after its component as the chart names it."""
        component = pod["metadata"]["labels"]["app.kubernetes.io/component"]
        return self.runner.container_log_path(pod["metadata"]["uid"], component)

    def records(self, pod: Json) -> list[Json]:
        """The JSON lines of the pod's log (`logFormat: json`); other lines (gunicorn's own, a print) left out."""
        path = self.log_path(pod)
        lines = path.read_text(errors="replace").splitlines() if path.exists() else []
        return [json.loads(line) for line in lines if line.startswith("{")]

    def cordon(self, unschedulable: bool) -> None:
        """Cordon (or uncordon) the runner's node: kube-scheduler places no new pod of the release there."""
        reply = self.api.patch(f"/api/v1/nodes/{self.runner.node}", {"spec": {"unschedulable": unschedulable}})
        assert reply.status == 200, reply.message

    def diagnose(self) -> str:
        """What a failed step needs: the release's pods and the tail of each container's log."""
        lines = []
        for pod in self.api.items(f"/api/v1/namespaces/{NAMESPACE}/pods"):
            meta, status = pod["metadata"], pod.get("status", {})
            states = [json.dumps(c.get("state")) for c in status.get("containerStatuses") or []]
            lines.append(f"pod {meta['name']}: {status.get('phase')} {' '.join(states)}")
            for container in pod["spec"]["containers"]:
                lines.append(self.runner.container_log(meta["uid"], container["name"])[-1500:])
        return "\n".join(lines)


def _ready(pod: Json) -> bool:
    conditions = pod.get("status", {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _certificates(bundle_b64: str) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(base64.b64decode(bundle_b64))


def _served_by(address: str, ca_pem: bytes) -> bool:
    """A TLS handshake with the webhook pod at `address` verifies against `ca_pem` for the Service's name."""
    with tempfile.NamedTemporaryFile("wb", suffix=".crt") as ca_file:
        ca_file.write(ca_pem)
        ca_file.flush()
        context = ssl.create_default_context(cafile=ca_file.name)
        try:
            with (
                socket.create_connection((address, 9443), timeout=3) as raw,
                context.wrap_socket(raw, server_hostname=f"{SERVICE}.{NAMESPACE}.svc"),
            ):
                return True
        except (OSError, ssl.SSLError):
            return False


@pytest.fixture(scope="module")
def release(cluster: ControlPlane, runner: PodRunner, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release]:
    helm = Helm(_extract_helm(tmp_path_factory.mktemp("helm4"), HELM_4), cluster.admin_kubeconfig)
    version = helm.run("version", "--short").stdout
    assert version.startswith("v4."), f"Helm 4 expected, got {version}"
    yield Release(cluster, helm, runner)
    helm.run("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait")


@pytest.fixture(scope="module")
def workloads(cluster: ControlPlane) -> Iterator[Pool]:
    """Fake nodes and a namespace for the workloads the installed scheduler places (nothing runs them)."""
    pool = Pool(cluster, "lifecycle")
    pool.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": pool.namespace}})
    pool.add_nodes(2, cpu="4")
    yield pool
    pool.teardown()


def _apply_crds(api: Api) -> None:
    for path in sorted((CHART / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        api.apply(crd)
    for path in sorted((CHART / "crds").glob("*.yaml")):
        name = yaml.safe_load(path.read_text())["metadata"]["name"]
        wait_for(
            lambda name=name: any(
                c["type"] == "Established" and c["status"] == "True"
                for c in (api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}") or {})
                .get("status", {})
                .get("conditions", [])
            ),
            what=f"CRD {name} established",
        )


def _dispatched(api: Api, flow_schema: str, priority_level: str) -> float:
    """Requests the API server dispatched through `flow_schema` at `priority_level` (its own /metrics)."""
    text = api.request("GET", "/metrics").message
    wanted = (f'flow_schema="{flow_schema}"', f'priority_level="{priority_level}"')
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("apiserver_flowcontrol_dispatched_requests_total{") and all(w in line for w in wanted)
    )


def test_1_install_then_crds_then_a_gang_gated_scheduled_and_preempted_through_the_service(
    release: Release, workloads: Pool
) -> None:
    # --skip-crds, then the CRDs: the order of `helm install --skip-crds` and a GitOps sync that applies them later
    TIMINGS["install to every pod Ready"] = release.install("--create-namespace", "--skip-crds")
    assert len(release.pods("webhook")) == 2 and len(release.pods("scheduler")) == 2, release.diagnose()
    assert {p["spec"]["nodeName"] for p in release.pods("webhook")} == {release.runner.node}
    bundles = release.ca_bundles()
    assert len(bundles) == 1 and "" not in bundles, "caBundle injected into every webhook by the chart's mechanism"
    assert release.lease_holder() in {p["metadata"]["name"] for p in release.pods("scheduler")}
    # the scheduler's requests are in kube-scheduler's priority level, not the service accounts' workload-low
    wait_for(
        lambda: _dispatched(release.api, f"{RELEASE}-scheduler", "workload-high") > 0,
        timeout=30,
        what="the scheduler's requests dispatched by its FlowSchema at workload-high",
    )

    _apply_crds(release.api)
    api, pool = release.api, workloads
    # seen by the webhook at once: a Queue update that closes a cycle is refused ...
    api.create(
        f"/apis/{PHALANX}/queues", {"apiVersion": PHALANX, "kind": "Queue", "metadata": {"name": "lc-a"}, "spec": {}}
    )
    api.create(
        f"/apis/{PHALANX}/queues",
        {"apiVersion": PHALANX, "kind": "Queue", "metadata": {"name": "lc-b"}, "spec": {"parentQueue": "lc-a"}},
    )
    cycle = api.patch(f"/apis/{PHALANX}/queues/lc-a", {"spec": {"parentQueue": "lc-b"}})
    assert cycle.status == 403 and "would create a cycle: lc-a -> lc-b -> lc-a" in cycle.message, cycle.message
    # ... and a member whose class differs from its PodGroup's gets the warning
    low = pool.priority_class("low", 10)
    high = pool.priority_class("high", 1000)
    pool.create(pool.pod_group("train", {"gang": {"minCount": 2}}, priority_class=low, disruption_mode="PodGroup"))
    member = pool.pod("train-0", cpu="4", priority_class=high, group="train", grace=0, scheduler_name=None)
    reply = api.request("POST", f"/api/v1/namespaces/{pool.namespace}/pods", member)
    assert reply.status == 201, reply.message
    assert any("differs from" in w and f"{pool.namespace}/train" in w for w in reply.warnings), reply.warnings
    # gated and defaulted by the webhook behind the Service, then bound as one by the installed scheduler
    assert [g["name"] for g in reply.body["spec"]["schedulingGates"]] == [GATE]
    assert reply.body["spec"]["schedulerName"] == SCHEDULER_NAME
    pool.create(pool.pod("train-1", cpu="4", priority_class=low, group="train", grace=0, scheduler_name=None))
    assert set(pool.wait_bound(["train-0", "train-1"]).values()) == set(pool.nodes)
    # a higher-priority gang takes both nodes: the lower one is preempted whole
    pool.create(pool.pod_group("urgent", {"gang": {"minCount": 2}}, priority_class=high))
    for i in range(2):
        pool.create(pool.pod(f"urgent-{i}", cpu="4", priority_class=high, group="urgent", scheduler_name=None))
    pool.wait_bound(["urgent-0", "urgent-1"], timeout=60)
    assert not pool.bound(["train-0", "train-1"])


def test_2_the_standby_scheduler_takes_over_when_the_leaders_pod_is_killed(release: Release, workloads: Pool) -> None:
    """The standby, a pod that ran before the kill, leads and binds a gang. The runner's node is cordoned
    meanwhile, so the ReplicaSet's replacement for the killed pod cannot start and take the Lease instead."""
    leader = release.lease_holder()
    standbys = {p["metadata"]["name"] for p in release.pods("scheduler")} - {leader}
    assert leader and standbys, f"leader {leader!r}, standbys {standbys}"
    release.cordon(True)
    try:
        killed_at = time.monotonic()
        release.api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{leader}", grace_period_seconds=0)  # no release
        pool = workloads
        pool.api.request("DELETE", f"/apis/{PHALANX}/namespaces/{pool.namespace}/podgroups/urgent")
        for name in ("urgent-0", "urgent-1"):
            pool.api.delete(f"/api/v1/namespaces/{pool.namespace}/pods/{name}", grace_period_seconds=0)
        pool.create(pool.pod_group("after", {"gang": {"minCount": 2}}))
        for i in range(2):
            pool.create(pool.pod(f"after-{i}", cpu="2", group="after", scheduler_name=None))
        successor = wait_for(lambda: (h := release.lease_holder()) != leader and h, timeout=40, what="a new leader")
        TIMINGS["scheduler failover: kill to new leader"] = time.monotonic() - killed_at
        pool.wait_bound(["after-0", "after-1"], timeout=30)
        TIMINGS["scheduler failover: kill to gang bound"] = time.monotonic() - killed_at
        assert successor in standbys, f"{successor} took over, not the standby ({', '.join(sorted(standbys))})"
    finally:
        release.cordon(False)
    wait_for(lambda: len(release.pods("scheduler")) == 2, timeout=90, what="the replacement scheduler pod Ready")


def test_3_losing_a_webhook_pod_fails_no_admission(release: Release) -> None:
    stream = AdmissionStream(release.api, "lc-stream-pod-loss").start()
    try:
        time.sleep(2)
        victim = release.pods("webhook")[0]["metadata"]["name"]
        deleted_at = time.monotonic()
        release.api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{victim}")
        wait_for(
            lambda: (
                len(release.pods("webhook")) == 2
                and victim not in {p["metadata"]["name"] for p in release.pods("webhook")}
                and release.api.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{victim}") is None
            ),
            timeout=90,
            what="the webhook Deployment back to 2 Ready pods",
        )
        back_at = time.monotonic()
        TIMINGS["webhook pod loss: delete to 2 Ready again"] = back_at - deleted_at
        time.sleep(2)
    finally:
        stream.stop()
    stream.check("a webhook pod's loss", deleted_at, back_at, release.webhook_errors)
    stream.remove()


def test_4_a_forced_certificate_rotation_fails_no_admission(release: Release) -> None:
    (before,) = release.ca_bundles()
    (old_ca,) = _certificates(before)
    stream = AdmissionStream(release.api, "lc-stream-rotation").start()
    try:
        started = time.monotonic()
        # lifetimes shorter than the current certificates': the webhook renews them at once, CA first
        release.upgrade("certificates.caDays=0.01", "certificates.days=0.005", "certificates.resyncSeconds=5")

        def rotated() -> bool:
            bundles = release.ca_bundles()
            if len(bundles) != 1:
                return False  # the two configurations are updated one after the other
            (bundle,) = bundles
            cas = _certificates(bundle) if bundle else []
            if len(cas) != 1 or cas[0] == old_ca:
                return False
            pem = base64.b64decode(bundle)
            return all(_served_by(p["status"]["podIP"], pem) for p in release.pods("webhook"))

        wait_for(rotated, timeout=120, interval=0.5, what="a new CA alone in caBundle, served by every webhook pod")
        done_at = time.monotonic()
        TIMINGS["certificate rotation: upgrade to old CA gone"] = done_at - started
        time.sleep(2)
    finally:
        stream.stop()
    stream.check("a CA rotation", started, done_at, release.webhook_errors)
    stream.remove()


def test_5_an_upgrade_rolls_both_deployments_fails_no_admission_and_the_scheduler_takes_the_new_config(
    release: Release, cluster: ControlPlane
) -> None:
    before, after = Pool(cluster, "lc-before-upgrade"), Pool(cluster, "lc-after-upgrade")
    for pool in (before, after):
        pool.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": pool.namespace}})
        pool.add_nodes(2, cpu="4")
    try:
        before.create(*(before.pod(f"p{i}", cpu="500m") for i in range(2)))
        assert len(set(before.wait_bound(["p0", "p1"]).values())) == 2, "LeastAllocated spreads"
        old = release.pods("scheduler") + release.pods("webhook")
        for pod in old:  # what the check below reads is each pod's own log: at info, its JSON lines are there
            levels = {r.get("level") for r in release.records(pod)}
            assert "info" in levels, f"{pod['metadata']['name']} logged no info line at logLevel info: {levels}"
        old_pods = {p["metadata"]["name"] for p in old}
        stream = AdmissionStream(release.api, "lc-stream-upgrade").start()
        try:
            began = time.monotonic()
            TIMINGS["upgrade: rolling update of both Deployments"] = release.upgrade(
                'scheduler.scoringStrategy.type="MostAllocated"', 'logLevel="warning"'
            )
            ended = time.monotonic()
            time.sleep(2)
        finally:
            stream.stop()
        stream.check("a rolling upgrade", began, ended, release.webhook_errors)
        stream.remove()
        new_pods = release.pods("scheduler") + release.pods("webhook")
        assert len(new_pods) == 4 and not old_pods & {p["metadata"]["name"] for p in new_pods}, "every pod replaced"
        after.create(after.pod("p0", cpu="500m"))
        after.wait_bound(["p0"])
        after.create(after.pod("p1", cpu="500m"))
        assert len(set(after.wait_bound(["p0", "p1"]).values())) == 1, "MostAllocated, from the upgraded config, packs"
        logged_at_warning_only(release, after, new_pods)
    finally:
        before.teardown()
        after.teardown()


def logged_at_warning_only(release: Release, pool: Pool, pods: list[Json]) -> None:
    """logLevel=warning reached every upgraded pod: its log (which exists: the container started) holds no line at
    info, ours or gunicorn's, and the leader writes a warning as a JSON line. It warns once a running pod's
    PriorityClass is deleted (the pod keeps its priority, unprotected by toleration until the class returns)."""
    for pod in pods:
        path, name = release.log_path(pod), pod["metadata"]["name"]
        assert path.exists(), f"{name} has no log at {path}"
        log = path.read_text(errors="replace")
        assert '"level": "info"' not in log and "[INFO]" not in log, (
            f"logLevel=warning did not reach {name}:\n{log[:2000]}"
        )
    gone = pool.priority_class("gone", 5)
    pool.create(pool.pod("orphan", cpu="500m", priority_class=gone))
    pool.wait_bound(["orphan"])
    reply = pool.api.request("DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{gone}")
    assert reply.status == 200, reply.message
    (leader,) = [p for p in pods if p["metadata"]["name"] == release.lease_holder()]
    warned = wait_for(
        lambda: [r for r in release.records(leader) if r.get("level") == "warning" and gone in json.dumps(r)],
        timeout=30,
        what="the upgraded leader's warning about the deleted class, as a JSON line",
    )
    assert warned[0]["event"] == "configuration ignored", warned


def test_6_uninstall_leaves_nothing_behind_and_pod_creation_works_at_once(release: Release) -> None:
    started = time.monotonic()
    TIMINGS["uninstall: helm uninstall --wait"] = release.helm_run("uninstall", RELEASE, "--wait")
    api = release.api
    api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lc-after"}})
    member = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "member", "namespace": "lc-after", "labels": {"scheduling.phalanx.dev/pod-group": "g"}},
        "spec": {"containers": [{"name": "c", "image": "registry.example/app:1"}]},
    }
    created = api.request("POST", "/api/v1/namespaces/lc-after/pods", member)
    assert created.status == 201, f"pod creation after uninstall: {created.status} {created.message}"

    def leftovers() -> list[str]:
        found = [
            config for config in WEBHOOK_CONFIGURATIONS if api.get(f"/apis/admissionregistration.k8s.io/v1/{config}")
        ]
        found += ["Lease"] if api.get(LEASE) else []
        found += ["Secret phalanx-webhook-tls"] if api.get(TLS_SECRET) else []
        for path in (
            f"/api/v1/namespaces/{NAMESPACE}/pods",
            f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs",
            f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments",
            f"/apis/apps/v1/namespaces/{NAMESPACE}/replicasets",
            f"/api/v1/namespaces/{NAMESPACE}/services",
            f"/apis/discovery.k8s.io/v1/namespaces/{NAMESPACE}/endpointslices",
            f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets",
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/roles",
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}/rolebindings",
        ):
            found += [f"{path.rsplit('/', 1)[1]}/{o['metadata']['name']}" for o in api.items(path)]
        found += [
            f"{path.rsplit('/', 1)[1]}/{o['metadata']['name']}"
            for path in (
                "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas",
            )
            for o in api.items(path, labelSelector=f"app.kubernetes.io/instance={RELEASE}")
        ]
        for kind in ("secrets", "configmaps", "serviceaccounts"):
            for obj in api.items(f"/api/v1/namespaces/{NAMESPACE}/{kind}"):
                name = obj["metadata"]["name"]
                if name not in PUBLISHED_IN_EVERY_NAMESPACE or obj["metadata"].get("finalizers"):
                    found.append(f"{kind}/{name}")
        return found

    try:
        wait_for(lambda: not leftovers(), timeout=60, what="everything the release made to be gone")
    except AssertionError:
        raise AssertionError(f"left 60 s after helm uninstall: {leftovers()}") from None
    TIMINGS["uninstall: until nothing is left"] = time.monotonic() - started


def test_7_installed_again_by_a_user_holding_only_the_documented_rights(release: Release, workloads: Pool) -> None:
    user = {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "user"}
    for doc in yaml.safe_load_all((ROOT / "docs" / "install-rbac.yaml").read_text()):
        if "subjects" in doc:
            doc["subjects"] = [user]
        release.api.apply(doc)
    as_user = Helm(release.helm.binary, release.plane.user_kubeconfig)
    TIMINGS["install again, as the unprivileged user"] = release.install(helm=as_user)
    assert len(release.pods("webhook")) == 2 and len(release.pods("scheduler")) == 2, release.diagnose()
    pool = workloads
    made = pool.create(pool.pod_group("again", {"gang": {"minCount": 1}}))[0]
    assert made["spec"]["disruptionMode"] == "Pod", "defaulted by the webhook of the new release"
    pool.create(pool.pod("again-0", cpu="1", group="again", scheduler_name=None))
    pool.wait_bound(["again-0"], timeout=60)
