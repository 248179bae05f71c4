"""The node: registers itself, watches the pods bound to it and runs them, as a kubelet does.

One `PodWorker` thread a pod: sandbox (network namespace, address), volumes, containers started by
`container.py` with the image's entry point, probes, restarts with backoff, the status the API server
shows (`phase`, `podIP`, conditions, `containerStatuses` with exit codes), and on deletion preStop,
SIGTERM, SIGKILL after the grace period, then the confirming DELETE (grace 0, guarded by the pod's uid).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import structlog

from tests.e2e.control_plane import Api, Json
from tests.e2e.podrunner.image import Image, ImageRefused, Registry
from tests.e2e.podrunner.network import Bridge, Relay, Sandbox, sweep
from tests.e2e.podrunner.probes import Probe, attempt
from tests.e2e.podrunner.volumes import PodVolumes, VolumeError, env_from, env_value

log = structlog.get_logger(__name__)

CONTAINER_SCRIPT = Path(__file__).with_name("container.py")
READ_ONLY_KINDS = ("secret", "configMap", "downwardAPI", "projected")
"""The kubelet mounts these read-only whatever `readOnly` says."""
TICK_SECONDS = 0.1


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class NodeSettings:
    """What one runner needs to know: where it runs things and what it may run."""

    name: str
    state: Path
    api: Api
    api_port: int
    registry: Registry
    image_root: Path
    """The checkout's virtualenv: the image's `/opt/phalanx`."""
    expose: tuple[str, ...]
    """Host paths the image's user must reach (this machine's Python, the virtualenv, the checkout)."""
    backoff_initial: float = 1.0
    backoff_max: float = 10.0
    """The kubelet's crash-loop backoff (10 s doubling to 5 min), scaled down for tests."""
    token_refresh_seconds: float | None = None


def expand(text: str, env: dict[str, str]) -> str:
    """`$(VAR)` references as the kubelet expands them in command, args and env; `$$` escapes."""
    return re.sub(r"\$\$|\$\((\w+)\)", lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), text)


@dataclass(slots=True)
class Container:
    """One container of a pod: its process, restarts, probes and the status it reports."""

    spec: Json
    pod: PodWorker
    image: Image | None = None
    process: subprocess.Popen[bytes] | None = None
    restart_count: int = 0
    state: Json = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: Json = field(default_factory=dict)
    ready: bool = False
    started: bool = False
    finished: bool = False
    """Exited for good (restartPolicy says no restart)."""
    next_start: float = 0.0
    backoff: float = 0.0
    started_at: float = 0.0
    probes: dict[str, Probe] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    def pull(self) -> bool:
        try:
            self.image = self.pod.node.registry.pull(self.spec.get("image", ""))
        except ImageRefused as err:
            self.state = {"waiting": {"reason": "ErrImagePull", "message": str(err)}}
            return False
        return True

    def start(self) -> None:
        assert self.image is not None
        try:
            spec = self.pod.launch_spec(self, self.image)
        except (VolumeError, ValueError) as err:
            self.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(err)}}
            self.next_start = time.monotonic() + self.pod.node.backoff_initial
            return
        spec_file = self.pod.dir / f"{self.name}.spec.json"
        spec_file.write_text(json.dumps(spec))
        log_file = (self.pod.dir / f"{self.name}.log").open("ab")
        self.process = subprocess.Popen(
            [sys.executable, str(CONTAINER_SCRIPT), str(spec_file)],
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={},
        )
        log_file.close()
        self.started_at = time.monotonic()
        self.state = {"running": {"startedAt": now_rfc3339()}}
        self.probes = {
            kind: Probe(self.spec[f"{kind}Probe"], self.started_at)
            for kind in ("startup", "liveness", "readiness")
            if self.spec.get(f"{kind}Probe")
        }
        self.started = "startup" not in self.probes
        self.ready = "readiness" not in self.probes and self.started

    def tick(self, now: float, restart_policy: str) -> None:
        if self.finished or self.image is None:
            return
        if self.process is None:
            if now >= self.next_start:
                self.start()
            return
        code = self.process.poll()
        if code is not None:
            self._exited(code, restart_policy, now)
            return
        self._probe(now)

    def _exited(self, code: int, restart_policy: str, now: float) -> None:
        exit_code = code if code >= 0 else 128 - code
        error_file = self.pod.dir / f"{self.name}.error"
        error = error_file.read_text() if code == 128 and error_file.exists() else ""
        reason = "StartError" if error else ("Completed" if exit_code == 0 else "Error")
        terminated = {
            "exitCode": exit_code,
            "reason": reason,
            "startedAt": self.state.get("running", {}).get("startedAt", now_rfc3339()),
            "finishedAt": now_rfc3339(),
        } | ({"message": error} if error else {})
        self.process, self.ready, self.started = None, False, False
        restart = restart_policy == "Always" or (restart_policy == "OnFailure" and exit_code != 0)
        if not restart:
            self.state, self.finished = {"terminated": terminated}, True
            return
        self.last_state = {"terminated": terminated}
        self.restart_count += 1
        self.backoff = (
            self.pod.node.backoff_initial if not self.backoff else min(self.backoff * 2, self.pod.node.backoff_max)
        )
        self.next_start = now + self.backoff
        meta = self.pod.pod["metadata"]
        pod = f"{meta['name']}_{meta['namespace']}({meta['uid']})"
        message = f"back-off {self.backoff:.0f}s restarting failed container={self.name} pod={pod}"
        self.state = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}

    def _probe(self, now: float) -> None:
        address = self.pod.sandbox.address
        startup = self.probes.get("startup")
        if startup is not None and not self.started:
            if startup.due(now):
                startup.run(address, self.spec, now)
                self.started = startup.passed
                if startup.failed_out:
                    self._kill_for("startup", startup.last_message)
            return
        liveness = self.probes.get("liveness")
        if liveness is not None and liveness.due(now):
            liveness.run(address, self.spec, now)
            if liveness.failed_out:
                self._kill_for("liveness", liveness.last_message)
                return
        readiness = self.probes.get("readiness")
        if readiness is not None and readiness.due(now):
            readiness.run(address, self.spec, now)
            self.ready = readiness.passed

    def _kill_for(self, probe: str, message: str) -> None:
        log.info(
            "container failed its probe, restarting",
            pod=self.pod.key,
            container=self.name,
            probe=probe,
            message=message,
        )
        self.signal(signal.SIGTERM)
        self.wait(self.pod.grace_seconds())
        self.signal(signal.SIGKILL)

    def signal(self, sig: int) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)

    def wait(self, seconds: float) -> None:
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=max(0.0, seconds))

    def pre_stop(self, deadline: float) -> None:
        """The preStop hook, bounded by what is left of the grace period (sleep and httpGet are supported)."""
        hook = (self.spec.get("lifecycle") or {}).get("preStop") or {}
        if "sleep" in hook:
            time.sleep(max(0.0, min(float(hook["sleep"]["seconds"]), deadline - time.monotonic())))
        elif "httpGet" in hook:
            attempt(
                {"httpGet": hook["httpGet"], "timeoutSeconds": max(1, int(deadline - time.monotonic()))},
                self.pod.sandbox.address,
                self.spec,
            )

    def status(self) -> Json:
        reported = {
            "name": self.name,
            "image": self.spec.get("image", ""),
            "imageID": f"{self.image.repository}@sha256:podrunner" if self.image else "",
            "ready": self.ready,
            "started": self.started and self.process is not None,
            "restartCount": self.restart_count,
            "state": self.state,
        }
        if self.process is not None:
            reported["containerID"] = f"podrunner://{self.process.pid}"
        if self.last_state:
            reported["lastState"] = self.last_state
        return reported


class PodWorker(threading.Thread):
    """Runs one pod from its binding to its deletion."""

    def __init__(self, node: NodeSettings, bridge: Bridge, relay: Relay, pod: Json) -> None:
        meta = pod["metadata"]
        super().__init__(name=f"pod-{meta['namespace']}/{meta['name']}", daemon=True)
        self.node, self.bridge, self.relay = node, bridge, relay
        self.pod = pod
        self.key = f"{meta['namespace']}/{meta['name']}"
        self.uid = str(meta["uid"])
        self.dir = node.state / "pods" / self.uid
        self.sandbox = Sandbox(bridge)
        self.containers = [Container(spec, self) for spec in pod["spec"].get("containers", [])]
        self.volumes: PodVolumes | None = None
        self.changed = threading.Event()
        self.gone = False
        """The pod object is no longer in the API (force-deleted): stop at once, confirm nothing."""
        self.stopping = False
        """The runner is shutting down: kill the containers, write nothing."""
        self._published: Json = {}
        self._conditions: dict[str, Json] = {}
        self._start_time = now_rfc3339()

    def update(self, pod: Json) -> None:
        self.pod = pod
        self.changed.set()

    def vanish(self) -> None:
        self.gone = True
        self.changed.set()

    def view(self) -> Json:
        """The pod as its containers see it through the downward API: with the address of its sandbox."""
        status = {**self.pod.get("status", {}), "podIP": self.sandbox.address, "hostIP": self.bridge.gateway}
        return {**self.pod, "status": status}

    def grace_seconds(self) -> float:
        meta, spec = self.pod["metadata"], self.pod["spec"]
        grace = meta.get("deletionGracePeriodSeconds", spec.get("terminationGracePeriodSeconds", 30))
        return float(grace)

    def run(self) -> None:
        try:
            self._run()
        except Exception:
            log.exception("pod worker failed", pod=self.key)
        finally:
            self._teardown()

    def _run(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.sandbox.create()
        self.relay.open(self.sandbox.netns)
        security = self.pod["spec"].get("securityContext") or {}
        self.volumes = PodVolumes(
            self.node.api, self.view(), self.dir / "volumes", security.get("fsGroup"), self.node.token_refresh_seconds
        )
        prepared = False
        last_refresh = 0.0
        restart_policy = self.pod["spec"].get("restartPolicy", "Always")
        while not self._deleting():
            now = time.monotonic()
            if not prepared and now - last_refresh > 2.0:
                prepared, last_refresh = self._prepare(), now
            elif prepared:
                for container in self.containers:
                    container.tick(now, restart_policy)
                if now - last_refresh > 2.0:
                    self.volumes.refresh()
                    last_refresh = now
            self._publish()
            self.changed.wait(TICK_SECONDS)
            self.changed.clear()
        self._terminate()

    def _prepare(self) -> bool:
        """Volumes, then images: False (retried, as the kubelet retries a mount) while a volume cannot be made."""
        assert self.volumes is not None
        try:
            self.volumes.create()
        except VolumeError as err:
            for container in self.containers:
                container.state = {"waiting": {"reason": "ContainerCreating", "message": str(err)}}
            return False
        for container in self.containers:
            container.pull()
        return True

    def _deleting(self) -> bool:
        return self.gone or self.stopping or bool(self.pod["metadata"].get("deletionTimestamp"))

    def _terminate(self) -> None:
        grace = 0.0 if self.gone else (2.0 if self.stopping else self.grace_seconds())
        deadline = time.monotonic() + grace
        running = [c for c in self.containers if c.process is not None]
        if not self.gone and not self.stopping:
            hooks = [threading.Thread(target=c.pre_stop, args=(deadline,), daemon=True) for c in running]
            for hook in hooks:
                hook.start()
            for hook in hooks:
                hook.join(max(0.0, deadline - time.monotonic()))
        for container in running:
            container.signal(signal.SIGTERM)
        for container in running:
            container.wait(deadline - time.monotonic())
            container.signal(signal.SIGKILL)
            container.wait(5)
        if self.gone or self.stopping:
            return
        meta = self.pod["metadata"]
        reply = self.node.api.delete(
            f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}", grace_period_seconds=0, uid=self.uid
        )
        if reply.status not in (200, 404, 409):
            log.warning("pod deletion not confirmed", pod=self.key, status=reply.status, message=reply.message)

    def _teardown(self) -> None:
        for container in self.containers:
            container.signal(signal.SIGKILL)
        if self.sandbox.netns:
            self.relay.close(self.sandbox.netns)
        self.sandbox.remove()
        if self.volumes is not None:
            self.volumes.remove()

    # what the pod's processes get

    def launch_spec(self, container: Container, image: Image) -> Json:
        assert self.volumes is not None
        spec, meta = self.pod["spec"], self.pod["metadata"]
        pod_security = spec.get("securityContext") or {}
        security = {**pod_security, **(container.spec.get("securityContext") or {})}
        image_uid, image_gid = image.uid_gid
        uid = int(security.get("runAsUser", image_uid))
        gid = int(security.get("runAsGroup", image_gid))
        if security.get("runAsNonRoot") and uid == 0:
            raise ValueError("container has runAsNonRoot and image will run as root")
        groups = sorted(
            {
                gid,
                *([pod_security["fsGroup"]] if "fsGroup" in pod_security else []),
                *pod_security.get("supplementalGroups", []),
            }
        )
        env = self._environment(container, image)
        argv = [expand(arg, env) for arg in image.argv(container.spec.get("command"), container.spec.get("args"))]
        if not argv:
            raise ValueError("no command specified")
        kinds = {v["name"]: next((k for k in READ_ONLY_KINDS if k in v), "") for v in self.volumes.volumes()}
        binds = [{"source": str(self.node.image_root), "target": "/opt/phalanx", "readOnly": True}]
        for mount in self.volumes.mounts(container.spec):
            if mount["name"] not in kinds:
                raise ValueError(f"volumeMounts: {mount['name']!r} is not a volume of the pod")
            source = self.volumes.path(mount["name"]) / mount.get("subPath", "")
            read_only = bool(mount.get("readOnly")) or bool(kinds[mount["name"]])
            binds.append({"source": str(source), "target": mount["mountPath"], "readOnly": read_only})
        hostname = str(spec.get("hostname") or meta["name"])[:63]
        return {
            "netns": f"/run/netns/{self.sandbox.netns}",
            "hostname": hostname,
            "rootfs": str(self._layer(container)),
            "expose": list(self.node.expose),
            "files": {
                "/etc/hostname": hostname + "\n",
                "/etc/hosts": f"127.0.0.1\tlocalhost\n::1\tlocalhost\n{self.sandbox.address}\t{hostname}\n",
            },
            "binds": binds,
            "readOnlyRootFilesystem": bool(security.get("readOnlyRootFilesystem")),
            "workdir": container.spec.get("workingDir") or image.workdir,
            "workdirOwner": [uid, gid],
            "uid": uid,
            "gid": gid,
            "groups": groups,
            "dropAllCapabilities": "ALL" in ((security.get("capabilities") or {}).get("drop") or []),
            "noNewPrivileges": security.get("allowPrivilegeEscalation") is False,
            "argv": argv,
            "env": env,
            "errorFile": str(self.dir / f"{container.name}.error"),
        }

    def _layer(self, container: Container) -> Path:
        layer = self.dir / "containers" / container.name
        layer.mkdir(parents=True, exist_ok=True)
        return layer

    def _environment(self, container: Container, image: Image) -> dict[str, str]:
        port = str(self.node.api_port)
        env = dict(image.env) | {
            "HOSTNAME": str(self.pod["spec"].get("hostname") or self.pod["metadata"]["name"])[:63],
            "HOME": image.workdir,
            "KUBERNETES_SERVICE_HOST": "127.0.0.1",
            "KUBERNETES_SERVICE_PORT": port,
            "KUBERNETES_SERVICE_PORT_HTTPS": port,
            "KUBERNETES_PORT": f"tcp://127.0.0.1:{port}",
        }
        for source in container.spec.get("envFrom") or []:
            env |= env_from(self.node.api, self.pod, source)
        for var in container.spec.get("env") or []:
            value = env_value(self.node.api, self.view(), var)
            if value is not None:
                env[var["name"]] = expand(value, env)
        return env

    # what the API server shows

    def _publish(self) -> None:
        status = self._status()
        if status == self._published or self.stopping:
            return
        meta = self.pod["metadata"]
        reply = self.node.api.patch(
            f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
            {"status": status},
            "application/strategic-merge-patch+json",
        )
        if reply.status == 200:
            self._published = status
        elif reply.status == 404:
            self.vanish()
        else:
            log.warning("pod status not written", pod=self.key, status=reply.status, message=reply.message)

    def _status(self) -> Json:
        containers = [c.status() for c in self.containers]
        running = any("running" in c["state"] for c in containers)
        finished = all(c.finished for c in self.containers)
        failed = any(c.state.get("terminated", {}).get("exitCode", 0) != 0 for c in self.containers)
        phase = ("Failed" if failed else "Succeeded") if finished else ("Running" if running else "Pending")
        ready = all(c.ready for c in self.containers) and not finished
        conditions = [
            self._condition("PodReadyToStartContainers", True),
            self._condition("Initialized", True),
            self._condition("ContainersReady", ready),
            self._condition("Ready", ready),
        ]
        ip = [{"ip": self.sandbox.address}]
        host = [{"ip": self.bridge.gateway}]
        return {
            "phase": phase,
            "conditions": conditions,
            "hostIP": self.bridge.gateway,
            "hostIPs": host,
            "podIP": self.sandbox.address,
            "podIPs": ip,
            "startTime": self._start_time,
            "containerStatuses": containers,
        }

    def _condition(self, kind: str, value: bool) -> Json:
        wanted = "True" if value else "False"
        held = self._conditions.get(kind)
        if held is None or held["status"] != wanted:
            held = {"type": kind, "status": wanted, "lastTransitionTime": now_rfc3339(), "lastProbeTime": None}
            self._conditions[kind] = held
        return held


class Node:
    """The runner: one registered node and the pods bound to it."""

    def __init__(self, settings: NodeSettings, prefix: str) -> None:
        self.settings = settings
        self.bridge = Bridge(prefix)
        self.relay = Relay(settings.api_port)
        self.workers: dict[str, PodWorker] = {}
        self._stop = threading.Event()

    def node_object(self) -> Json:
        name = self.settings.name
        resources = {"cpu": "8", "memory": "16Gi", "pods": "110", "ephemeral-storage": "100Gi"}
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": {
                    "kubernetes.io/hostname": name,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "node.phalanx.dev/podrunner": "true",
                },
            },
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "addresses": [
                    {"type": "InternalIP", "address": self.bridge.gateway},
                    {"type": "Hostname", "address": name},
                ],
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "podrunner is posting ready status",
                        "lastHeartbeatTime": now_rfc3339(),
                        "lastTransitionTime": now_rfc3339(),
                    }
                ],
                "nodeInfo": {
                    "kubeletVersion": "v1.36.2-podrunner",
                    "operatingSystem": "linux",
                    "architecture": "amd64",
                    "containerRuntimeVersion": "podrunner://1",
                    "kernelVersion": os.uname().release,
                    "osImage": "podrunner",
                    "kubeProxyVersion": "",
                    "machineID": "",
                    "systemUUID": "",
                    "bootID": "",
                },
            },
        }

    def run(self) -> None:
        sweep(self.bridge.prefix)  # what an earlier runner of this prefix left behind
        self.bridge.create()
        self.settings.api.apply(self.node_object())
        log.info("node registered", node=self.settings.name, subnet=str(self.bridge.subnet))
        path = f"/api/v1/pods?fieldSelector=spec.nodeName%3D{self.settings.name}"
        while not self._stop.is_set():
            try:
                listing = self.settings.api.get(path)
                assert listing is not None
                self._sync({p["metadata"]["uid"]: p for p in listing["items"]})
                version = listing["metadata"]["resourceVersion"]
                while not self._stop.is_set():
                    for event in self.settings.api.watch(path, version, timeout_seconds=30):
                        version = self._apply(event) or version
                        if self._stop.is_set():
                            break
            except Exception as err:
                if not self._stop.is_set():
                    log.warning("pod watch failed, relisting", error=str(err)[:200])
                    self._stop.wait(0.5)

    def _apply(self, event: Json) -> str:
        kind, pod = event["type"], event["object"]
        if kind == "ERROR":
            raise RuntimeError(f"watch error: {pod.get('message')}")
        version = str(pod.get("metadata", {}).get("resourceVersion", ""))
        if kind == "BOOKMARK":
            return version
        uid = pod["metadata"]["uid"]
        if kind == "DELETED":
            worker = self.workers.pop(uid, None)
            if worker is not None:
                worker.vanish()
        else:
            self._ensure(pod)
        return version

    def _sync(self, pods: dict[str, Json]) -> None:
        for uid in list(self.workers):
            if uid not in pods:
                self.workers.pop(uid).vanish()
        for pod in pods.values():
            self._ensure(pod)

    def _ensure(self, pod: Json) -> None:
        uid = pod["metadata"]["uid"]
        worker = self.workers.get(uid)
        if worker is not None:
            worker.update(pod)
            return
        if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
            return  # done before this runner started; the API server deletes terminal pods at once
        worker = PodWorker(self.settings, self.bridge, self.relay, pod)
        self.workers[uid] = worker
        worker.start()

    def stop(self) -> None:
        self._stop.set()
        for worker in list(self.workers.values()):
            worker.stopping = True
            worker.changed.set()
        for worker in list(self.workers.values()):
            worker.join(timeout=10)
        with contextlib.suppress(Exception):
            self.settings.api.request("DELETE", f"/api/v1/nodes/{self.settings.name}")
        self.bridge.remove()
