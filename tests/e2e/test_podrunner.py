"""The pod runner behaves as a kubelet would, seen through the API: what the lifecycle suite relies on.

Pods are bound to the runner's node by `spec.nodeName` and run the project's image; a pod reports what
it sees from inside (user, files, environment, the API server) on its stdout, which the runner keeps.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import subprocess
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest

from tests.chart.conftest import IMAGE_REPOSITORY
from tests.e2e.control_plane import Api, ControlPlane, Json
from tests.e2e.podrunner.image import split_reference
from tests.e2e.podrunner.network import NETNS_DIR
from tests.e2e.runner import PodRunner
from tests.polling import wait_for

IMAGE = f"{IMAGE_REPOSITORY}:{version('phalanx')}"
NAMESPACE = "podrunner"
ADDRESSES = ipaddress.ip_network("198.18.0.0/15")

INSPECT = """
import json, os, socket
from kubernetes import client, config

def attempt(action):
    try:
        action()
        return "ok"
    except OSError as err:
        return err.strerror

config.load_incluster_config()
print(json.dumps({
    "uid": os.getuid(), "gid": os.getgid(), "groups": sorted(os.getgroups()),
    "hostname": socket.gethostname(), "cwd": os.getcwd(),
    "env": {k: os.environ.get(k) for k in ("POD_NAME", "POD_NAMESPACE", "POD_IP", "PASSWORD", "COLOUR", "FROM_MAP")},
    "root_write": attempt(lambda: open("/written", "w")),
    "scratch_write": attempt(lambda: open("/scratch/written", "w")),
    "secret_write": attempt(lambda: open("/secret/written", "w")),
    "files": {path: open(path).read() for path in ("/secret/password", "/config/colour", "/info/labels",
                                                    "/projected/password", "/projected/name")},
    "api": client.VersionApi().get_code().git_version,
}))
"""


@pytest.fixture(scope="module")
def api(cluster: ControlPlane, runner: PodRunner) -> Iterator[Api]:
    admin = cluster.api()
    admin.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    admin.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "inspector", "namespace": NAMESPACE}}
    )
    yield admin
    admin.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}")


def pod(name: str, runner: PodRunner, image: str = IMAGE, **spec: object) -> Json:
    body: Json = {
        "nodeName": runner.node,
        "containers": [{"name": "main", "image": image, **spec.pop("container", {})}],  # type: ignore[dict-item]
        **spec,
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE}, "spec": body}


def create(api: Api, body: Json) -> Json:
    return api.create(f"/api/v1/namespaces/{NAMESPACE}/pods", body)


def read(api: Api, name: str) -> Json | None:
    return api.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")


def phase(api: Api, name: str, *wanted: str) -> Json | None:
    found = read(api, name)
    return found if found is not None and found.get("status", {}).get("phase") in wanted else None


def container_state(api: Api, name: str) -> Json:
    statuses = (read(api, name) or {}).get("status", {}).get("containerStatuses") or [{}]
    return dict(statuses[0])


def test_a_pod_runs_the_image_as_the_securitycontext_says_with_its_volumes_env_and_token(
    api: Api, runner: PodRunner
) -> None:
    api.create(
        f"/api/v1/namespaces/{NAMESPACE}/secrets",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "creds"},
            "data": {"password": base64.b64encode(b"hunter2").decode()},
        },
    )
    api.create(
        f"/api/v1/namespaces/{NAMESPACE}/configmaps",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "paint"}, "data": {"colour": "teal"}},
    )
    field = lambda path: {"fieldRef": {"fieldPath": path}}  # noqa: E731
    body = pod(
        "inspector",
        runner,
        serviceAccountName="inspector",
        restartPolicy="Never",
        securityContext={"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532},
        volumes=[
            {"name": "scratch", "emptyDir": {}},
            {"name": "secret", "secret": {"secretName": "creds", "defaultMode": 0o440}},
            {"name": "config", "configMap": {"name": "paint"}},
            {
                "name": "info",
                "downwardAPI": {"items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]},
            },
            {
                "name": "projected",
                "projected": {
                    "sources": [
                        {"secret": {"name": "creds", "items": [{"key": "password", "path": "password"}]}},
                        {"downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
                    ]
                },
            },
        ],
        container={
            "command": ["python", "-c", INSPECT],
            "env": [
                {"name": "POD_NAME", "valueFrom": field("metadata.name")},
                {"name": "POD_NAMESPACE", "valueFrom": field("metadata.namespace")},
                {"name": "POD_IP", "valueFrom": field("status.podIP")},
                {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
                {"name": "FROM_MAP", "valueFrom": {"configMapKeyRef": {"name": "paint", "key": "colour"}}},
                {"name": "COLOUR", "value": "$(FROM_MAP)-ish"},
            ],
            "securityContext": {
                "readOnlyRootFilesystem": True,
                "allowPrivilegeEscalation": False,
                "capabilities": {"drop": ["ALL"]},
            },
            "volumeMounts": [
                {"name": "scratch", "mountPath": "/scratch"},
                {"name": "secret", "mountPath": "/secret"},
                {"name": "config", "mountPath": "/config"},
                {"name": "info", "mountPath": "/info"},
                {"name": "projected", "mountPath": "/projected"},
            ],
        },
    )
    body["metadata"]["labels"] = {"app": "inspector"}
    made = create(api, body)
    done = wait_for(lambda: phase(api, "inspector", "Succeeded", "Failed"), timeout=60, what="the inspector to finish")
    output = runner.container_log(made["metadata"]["uid"], "main")
    assert done["status"]["phase"] == "Succeeded", output[-2000:]
    seen = json.loads(output.strip().splitlines()[-1])
    assert (seen["uid"], seen["gid"], seen["groups"]) == (65532, 65532, [65532])
    assert seen["hostname"] == "inspector"
    assert seen["cwd"] == "/home/nonroot"  # the Dockerfile's WORKDIR
    assert seen["env"] == {
        "POD_NAME": "inspector",
        "POD_NAMESPACE": NAMESPACE,
        "POD_IP": done["status"]["podIP"],
        "PASSWORD": "hunter2",
        "COLOUR": "teal-ish",
        "FROM_MAP": "teal",
    }
    assert seen["root_write"] == "Read-only file system"
    assert seen["scratch_write"] == "ok"
    assert seen["secret_write"] == "Read-only file system"
    assert seen["files"] == {
        "/secret/password": "hunter2",
        "/config/colour": "teal",
        "/info/labels": 'app="inspector"',
        "/projected/password": "hunter2",
        "/projected/name": "inspector",
    }
    assert seen["api"] == "v1.36.2"  # through the relay, with the ServiceAccount token at its usual path
    status = done["status"]
    assert ipaddress.ip_address(status["podIP"]) in ADDRESSES
    terminated = status["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")


@pytest.mark.parametrize(
    ("name", "container", "want_output", "want_exit"),
    [
        pytest.param("entrypoint-and-cmd", {}, "usage: phalanx", 0, id="no command or args: ENTRYPOINT then CMD"),
        pytest.param("args-replace-cmd", {"args": ["--version"]}, "phalanx 0.1.0", 0, id="args replace CMD"),
        pytest.param(
            "command-replaces-entrypoint",
            {"command": ["python"], "args": ["-c", "print('not phalanx'); raise SystemExit(3)"]},
            "not phalanx",
            3,
            id="command replaces ENTRYPOINT",
        ),
    ],
)
def test_command_and_args_follow_docker_semantics_from_the_dockerfile(
    api: Api, runner: PodRunner, name: str, container: Json, want_output: str, want_exit: int
) -> None:
    made = create(api, pod(name, runner, restartPolicy="Never", container=container))
    done = wait_for(lambda: phase(api, name, "Succeeded", "Failed"), timeout=60, what=f"{name} to finish")
    assert want_output in runner.container_log(made["metadata"]["uid"], "main")
    assert done["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == want_exit


def test_an_entry_point_the_image_lacks_is_a_start_error(api: Api, runner: PodRunner) -> None:
    create(api, pod("no-such-binary", runner, restartPolicy="Never", container={"command": ["phalanx-nope"]}))
    wait_for(lambda: phase(api, "no-such-binary", "Failed"), timeout=60, what="the pod to fail")
    terminated = container_state(api, "no-such-binary")["state"]["terminated"]
    assert (terminated["reason"], terminated["exitCode"]) == ("StartError", 128)
    assert terminated["message"] == 'exec: "phalanx-nope": executable file not found in $PATH'


def test_an_image_other_than_the_projects_is_refused(api: Api, runner: PodRunner) -> None:
    create(api, pod("foreign", runner, image="docker.io/library/nginx:1.27"))
    waiting = wait_for(
        lambda: (
            container_state(api, "foreign").get("state", {}).get("waiting", {}).get("reason") == "ErrImagePull"
            and container_state(api, "foreign")["state"]["waiting"]
        ),
        what="ErrImagePull",
    )
    assert "docker.io/library/nginx:1.27" in waiting["message"]
    assert phase(api, "foreign", "Pending")
    repository, _ = split_reference(IMAGE)
    create(api, pod("old-tag", runner, image=f"{repository}:0.0.1"))
    wait_for(
        lambda: (
            "manifest unknown" in container_state(api, "old-tag").get("state", {}).get("waiting", {}).get("message", "")
        ),
        what="an unknown tag refused",
    )


def test_probes_drive_ready_and_restarts_and_restart_policy_is_honoured(api: Api, runner: PodRunner) -> None:
    serve = {"command": ["python", "-m", "http.server", "8080"], "ports": [{"name": "http", "containerPort": 8080}]}
    ready = {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 1}
    create(api, pod("serving", runner, container={**serve, "readinessProbe": ready}))
    dead = {"tcpSocket": {"port": 9999}, "periodSeconds": 1, "failureThreshold": 2}
    create(api, pod("unhealthy", runner, terminationGracePeriodSeconds=1, container={**serve, "livenessProbe": dead}))
    create(api, pod("crashing", runner, container={"command": ["python", "-c", "raise SystemExit(3)"]}))
    create(api, pod("once", runner, restartPolicy="OnFailure", container={"args": ["--version"]}))

    def condition(name: str, kind: str) -> str:
        conditions = (read(api, name) or {}).get("status", {}).get("conditions") or []
        return next((c["status"] for c in conditions if c["type"] == kind), "")

    wait_for(lambda: condition("serving", "Ready") == "True", timeout=60, what="serving to be Ready")
    wait_for(
        lambda: container_state(api, "unhealthy").get("restartCount", 0) >= 1, timeout=60, what="a liveness restart"
    )
    crashing = wait_for(
        lambda: container_state(api, "crashing").get("restartCount", 0) >= 2 and container_state(api, "crashing"),
        timeout=60,
        what="crash-loop restarts",
    )
    assert crashing["lastState"]["terminated"]["exitCode"] == 3
    assert wait_for(lambda: phase(api, "once", "Succeeded"), timeout=60, what="OnFailure to stop after exit 0")
    assert container_state(api, "once")["restartCount"] == 0


def test_deletion_sends_sigterm_then_sigkill_after_the_grace_period(api: Api, runner: PodRunner) -> None:
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(600)"
    )
    polite = "import time; print('up', flush=True); time.sleep(600)"
    made = {
        name: create(
            api, pod(name, runner, terminationGracePeriodSeconds=3, container={"command": ["python", "-c", code]})
        )
        for name, code in (("stubborn", stubborn), ("polite", polite))
    }
    for name, body in made.items():
        uid = body["metadata"]["uid"]
        # Running as soon as its process exists: wait until it has set its signal handler
        wait_for(lambda uid=uid: "up" in runner.container_log(uid, "main"), timeout=60, what=f"{name} started")
    gone: dict[str, float] = {}
    started = time.monotonic()
    for name in made:
        api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")

    def removed() -> bool:
        for name in made:
            if name not in gone and read(api, name) is None:
                gone[name] = time.monotonic() - started
        return len(gone) == len(made)

    wait_for(removed, timeout=30, what="both pods removed by the runner")
    assert gone["polite"] < 2.5, gone  # exits at SIGTERM
    assert 2.5 <= gone["stubborn"] < 8, gone  # killed once its 3 s are over


def test_each_pod_has_an_address_of_its_own_and_the_token_is_refreshed(api: Api, runner: PodRunner) -> None:
    watch_token = textwrap.dedent(
        """
        import hashlib, time
        from kubernetes import client, config
        seen = []
        while len(seen) < 2:
            token = open("/var/run/secrets/kubernetes.io/serviceaccount/token").read()
            digest = hashlib.sha256(token.encode()).hexdigest()[:12]
            if digest not in seen:
                seen.append(digest)
                config.load_incluster_config()
                print(digest, client.VersionApi().get_code().git_version, flush=True)
            time.sleep(0.5)
        """
    )
    made = create(
        api,
        pod(
            "tokens",
            runner,
            serviceAccountName="inspector",
            restartPolicy="Never",
            container={"command": ["python", "-c", watch_token]},
        ),
    )
    other = create(api, pod("neighbour", runner, container={"command": ["python", "-m", "http.server", "8080"]}))
    done = wait_for(lambda: phase(api, "tokens", "Succeeded", "Failed"), timeout=60, what="a refreshed token used")
    lines = runner.container_log(made["metadata"]["uid"], "main").split()
    assert done["status"]["phase"] == "Succeeded" and lines.count("v1.36.2") == 2, lines
    neighbour = wait_for(lambda: (read(api, "neighbour") or {}).get("status", {}).get("podIP"))
    addresses = {done["status"]["podIP"], neighbour}
    assert len(addresses) == 2 and all(ipaddress.ip_address(a) in ADDRESSES for a in addresses)
    # the address is the neighbour's own: a request to it reaches that pod's server, which logs it
    wait_for(lambda: answers(f"http://{neighbour}:8080/"), timeout=30, what="the neighbour's server at its address")
    assert '"GET / HTTP/1.1" 200' in runner.container_log(other["metadata"]["uid"], "main")


def answers(url: str) -> bool:
    """A GET of `url` from this machine (no proxy) is answered with 200."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=2) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def test_a_killed_runner_leaves_no_namespace_link_or_process_behind(
    cluster: ControlPlane, api: Api, tmp_path_factory: pytest.TempPathFactory
) -> None:
    second = PodRunner(cluster, "runner-doomed", tmp_path_factory.mktemp("doomed")).start()
    try:
        create(api, pod("orphan", second, container={"command": ["python", "-c", "import time; time.sleep(600)"]}))
        wait_for(lambda: phase(api, "orphan", "Running"), timeout=60, what="the orphan running")
        pid = int(container_state(api, "orphan")["containerID"].removeprefix("podrunner://"))
        assert Path(f"/proc/{pid}").exists()
        assert any(p.name.startswith(second.prefix) for p in NETNS_DIR.iterdir())
        assert second.proc is not None
        second.proc.kill()  # SIGKILL: the runner cleans up nothing itself
        second.proc.wait()  # reaped, as init reaps a runner whose test run was killed

        def left() -> list[str]:
            links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
            named = [p.name for p in NETNS_DIR.iterdir() if p.name.startswith(second.prefix)]
            return named + [line for line in links.splitlines() if second.prefix in line]

        wait_for(lambda: not left(), timeout=20, what="the watchdog to sweep")
        wait_for(lambda: not Path(f"/proc/{pid}").exists(), timeout=5, what="the orphan's process killed")
    finally:
        second.stop()
        api.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/orphan", grace_period_seconds=0)
        api.request("DELETE", "/api/v1/nodes/runner-doomed")


def test_a_runner_sweeps_what_a_runner_killed_with_its_watchdog_left(
    cluster: ControlPlane, runner: PodRunner, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A namespace and a link of a prefix no live runner holds (its runner and watchdog killed together) are gone
    once another runner starts; the live runner's own are kept."""
    subprocess.run(["ip", "netns", "add", "phxdead-pod0"], check=True)
    subprocess.run(["ip", "link", "add", "phxdeadbr", "type", "bridge"], check=True)
    other = PodRunner(cluster, "runner-sweeper", tmp_path_factory.mktemp("sweeper")).start()
    try:
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
        assert not (NETNS_DIR / "phxdead-pod0").exists()
        assert "phxdeadbr" not in links
        assert f"{runner.prefix}br" in links, "the live runner's bridge is kept"
    finally:
        other.stop()
        subprocess.run(["ip", "netns", "del", "phxdead-pod0"], check=False, capture_output=True)
        subprocess.run(["ip", "link", "del", "phxdeadbr"], check=False, capture_output=True)
        cluster.api().request("DELETE", "/api/v1/nodes/runner-sweeper")
