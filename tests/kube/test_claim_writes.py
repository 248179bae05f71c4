"""The Kubernetes back end's ResourceClaim allocations while its claims watch lags behind its pods watch: the
loopback server holds the claims watch, which the real one cannot be made to do on demand (the device fuzz of
`tests/e2e/test_devices_fuzz.py` met it by chance, one device given to two claims)."""

from __future__ import annotations

from pathlib import Path

from tests.apiserver import ApiServer
from tests.builders import make_node, make_pod
from tests.devices import claim_spec, device_class, gpu_slice, resource_claim
from tests.kube.replica import Replica, fast_config, node_of
from tests.polling import wait_for

CLAIMS_WATCH = "/apis/resource.k8s.io/v1/resourceclaims"


def allocated(server: ApiServer, name: str) -> list[str]:
    raw = server.get("resourceclaims", name, "default", group="resource.k8s.io")
    assert raw is not None
    allocation = raw.get("status", {}).get("allocation") or {}
    return [f"{r['pool']}/{r['device']}" for r in allocation.get("devices", {}).get("results", [])]


def test_a_device_allocated_is_not_given_again_while_the_claims_watch_has_not_shown_it(
    apiserver: ApiServer, kubeconfig: Path, replicas: list[Replica]
) -> None:
    """One GPU, two pods each with its own claim for it, the second created once the first is bound. The claims
    watch is held from just before the first allocation until after the second pod is tried: the second pod must
    wait ("cannot allocate all claims"), not be given the GPU the first one's claim holds."""
    apiserver.create(make_node("n0").cap(cpu="8", memory="8Gi").label("kubernetes.io/hostname", "n0").json())
    apiserver.create(device_class("gpu"))
    apiserver.create(gpu_slice("n0", ["a100"]))
    for name in ("first", "second"):
        apiserver.create(resource_claim(name, "default", claim_spec("gpu", [])))
    replica = Replica(apiserver, kubeconfig, fast_config(), "a").start()
    replicas.append(replica)
    wait_for(lambda: apiserver.requests_matching("GET", CLAIMS_WATCH))
    apiserver.hang("GET", CLAIMS_WATCH, seconds=15)
    apiserver.restart(compact=False)  # every watch dropped: the claims one comes back to a held request
    apiserver.create(make_pod("first").req(cpu="1").named_claim("gpu", "first").json())
    wait_for(lambda: node_of(apiserver, "first") == "n0", timeout=10)
    assert allocated(apiserver, "first") == ["n0/gpu-0"]
    apiserver.create(make_pod("second").req(cpu="1").named_claim("gpu", "second").json())

    def told() -> bool:
        pod = apiserver.get("pods", "second", "default")
        conditions = (pod or {}).get("status", {}).get("conditions", [])
        return any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conditions)

    wait_for(lambda: told() or node_of(apiserver, "second") is not None, timeout=10)
    given = allocated(apiserver, "second")
    assert node_of(apiserver, "second") is None, f"bound beside the first, its claim given {given}"
    assert allocated(apiserver, "second") == []
