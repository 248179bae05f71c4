"""The end-to-end suite's fixtures: one real control plane per session, Phalanx installed on it, a pool per test.

The suite runs whenever `../shared/kube` is beside the checkout (always in CI) and is skipped, with one
line saying how to enable it, when it is not (the envtest convention). `make test` runs it in a pytest
process of its own after the other suites (which run on two xdist workers), so a run starts one control
plane, not one per worker.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chart.conftest import Helm, _extract_helm
from tests.e2e.control_plane import ControlPlane, available
from tests.e2e.differential.kube_scheduler import KubeScheduler
from tests.e2e.differential.live import KUBE_SCHEDULER_NAME
from tests.e2e.objects import SCHEDULER_NAME, Pool
from tests.e2e.runner import PodRunner
from tests.e2e.sides import Side
from tests.e2e.stack import Stack
from tests.e2e.timings import TIMINGS

HERE = Path(__file__).parent
SKIP_REASON = (
    "real control plane not found: put the shared folder (with kube/up.sh) beside the checkout, "
    "as ../shared, to run tests/e2e"
)


WITHOUT_POD_RUNNER = "PHALANX_E2E_WITHOUT_POD_RUNNER"
"""Set to 1, the pod-runner and lifecycle tests are skipped where they cannot run; otherwise they fail there
(`make test` checks it first: tests/e2e/prerequisites.sh)."""

LAST = "test_rbac.py"
"""Reads the audit log of everything the suite did, so it runs after every other e2e test."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: HERE in Path(str(item.fspath)).parents and Path(str(item.fspath)).name == LAST)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The lifecycle suite's timings (install, failover, rotation, upgrade, uninstall), for the run's log."""
    if TIMINGS:
        terminalreporter.section("Phalanx installed with helm: seconds per step")
        for step, seconds in TIMINGS.items():
            terminalreporter.write_line(f"{step:<48} {seconds:7.1f}")


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skipped from here, not from a fixture, so pytest reports one line for the whole suite."""
    if HERE in Path(str(item.fspath)).parents and not available():
        pytest.skip(SKIP_REASON)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = ControlPlane(tmp_path_factory.mktemp("kube")).start()
    yield plane
    plane.stop()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A second control plane, where Phalanx is installed as a user installs it (`helm install`): one node run
    by the pod runner, kube-scheduler for the chart's own pods, and webhooks called at their Service's
    endpoints. Its own, because the chart's webhooks act cluster-wide beside the `stack`'s."""
    plane = ControlPlane(tmp_path_factory.mktemp("cluster"), kube_scheduler=True, aggregator_routing=True).start()
    yield plane
    plane.stop()


@pytest.fixture(scope="session")
def runner(cluster: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PodRunner]:
    """The node `runner-0` of `cluster`: pods bound to it run as processes (tokens refreshed every 10 s)."""
    missing = [need for need, met in (("root", os.geteuid() == 0), ("iproute2", shutil.which("ip"))) if not met]
    if missing:
        why = "the pod runner needs root and iproute2 (network namespaces, veth links, mounts), as a kubelet does; "
        why += f"no {' and no '.join(missing)} here"
        if os.environ.get(WITHOUT_POD_RUNNER) == "1":
            pytest.skip(f"{why} ({WITHOUT_POD_RUNNER}=1)")
        pytest.fail(f"{why}: run as root with iproute2, or set {WITHOUT_POD_RUNNER}=1 to skip them", pytrace=False)
    node = PodRunner(cluster, "runner-0", tmp_path_factory.mktemp("runner"), token_refresh_seconds=10).start()
    yield node
    node.stop()


@pytest.fixture(scope="session")
def e2e_helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(_extract_helm(tmp_path_factory.mktemp("e2e-helm")))


@pytest.fixture(scope="session")
def stack(control_plane: ControlPlane, e2e_helm: Helm, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The chart installed, the webhook serving and a scheduler leading, all as the unprivileged `user`."""
    installed = Stack(control_plane, e2e_helm, tmp_path_factory.mktemp("phalanx"))
    installed.install()
    installed.start_webhook()
    installed.start_scheduler()
    yield installed
    installed.stop()


@pytest.fixture
def phalanx(stack: Stack) -> Stack:
    """The stack with a scheduler running (a test that killed or replaced it leaves the next one a fresh one)."""
    if stack.scheduler is None or not stack.scheduler.running:
        stack.start_scheduler()
    return stack


@pytest.fixture
def pool(phalanx: Stack, request: pytest.FixtureRequest) -> Iterator[Pool]:
    """This test's namespace and (empty) node pool; everything it made is removed afterwards."""
    name = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:36].rstrip("-")
    digest = hashlib.blake2b(request.node.nodeid.encode(), digest_size=3).hexdigest()
    made = Pool(phalanx.plane, f"e2e-{name}-{digest}")
    phalanx.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": made.namespace}})
    yield made
    made.teardown()


@pytest.fixture(scope="module")
def kube_scheduler(
    request: pytest.FixtureRequest, control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KubeScheduler]:
    """kube-scheduler 1.36.2 beside Phalanx, one per module that compares with it (`differential/kube_scheduler.py`):
    its own scheduler name, so each test chooses which pods it takes."""
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    started = KubeScheduler(control_plane, tmp_path_factory.mktemp(f"kube-scheduler-{name}")).start()
    yield started
    started.stop()


@pytest.fixture
def sides(pool: Pool, kube_scheduler: KubeScheduler) -> Iterator[dict[str, Side]]:
    """Both schedulers' copies of a scenario (`sides.py`); the module brings its own `kube_scheduler` fixture."""
    kube_namespace = f"{pool.namespace}-kube"
    pool.api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": kube_namespace}})
    made = {
        "phalanx": Side(pool, "phalanx", SCHEDULER_NAME, pool.namespace),
        "kube": Side(pool, "kube", KUBE_SCHEDULER_NAME, kube_namespace),
    }
    yield made
    pool.api.request("DELETE", f"/api/v1/namespaces/{kube_namespace}")
    for name in made["kube"].pods():
        pool.api.delete(f"/api/v1/namespaces/{kube_namespace}/pods/{name}", grace_period_seconds=0)
