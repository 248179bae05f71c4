"""`kubectl phalanx explain -f DIR` of units whose pods claim devices (DRA): each claim, the devices it has or the dry
run gives it, and why one cannot be allocated, in the DynamicResources plugin's words.

The dump is a directory, as `kubectl get ... -o yaml` of each kind writes it: the DeviceClass and the nodes'
ResourceSlices (`tests/devices.py`), the nodes, the claims and the pods. Two nodes: `h100` publishes two h100,
`a100` one a100. The same objects on the loopback API server, which serves no explain API, are listed by the command
(the served answer, from the scheduler's informers, is `tests/e2e/test_devices_explain.py`).
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from phalanx.kubectl.cli import main
from tests.apiserver.server import ApiServer
from tests.builders import EPOCH, make_node, make_pod, make_podgroup, yaml_documents
from tests.devices import DRIVER, Json, claim_spec, device_class, gpu_slice, model_is, resource_claim

NOW = "2026-01-01T12:00:00Z"
CLASS = "gpu"


def gpu_nodes() -> dict[str, list[Json]]:
    """The DeviceClass, the nodes' ResourceSlices and the nodes, by the file of a dump that holds them."""
    return {
        "devices.yaml": [device_class(CLASS), gpu_slice("h100", ["h100", "h100"]), gpu_slice("a100", ["a100"])],
        "nodes.yaml": [make_node("h100").cap(cpu="16").json(), make_node("a100").cap(cpu="4").json()],
    }


def devices_dump(tmp_path: Path, claims: list[Json], pods: list[Json]) -> str:
    """The dump: one file per kind, in one directory."""
    files = {**gpu_nodes(), "claims.yaml": claims, "pods.yaml": pods}
    for name, objects in files.items():
        (tmp_path / name).write_text(yaml_documents(objects))
    return str(tmp_path)


def one_of(model: str) -> Json:
    return claim_spec(CLASS, [model_is(model)])


def two_requests() -> Json:
    """`gpu`, an h100 (which the h100 node has), and `small`, an l4 (which no node has)."""
    spec = one_of("h100")
    small = {
        "name": "small",
        "exactly": {"deviceClassName": CLASS, "selectors": [{"cel": {"expression": model_is("l4")}}]},
    }
    spec["devices"]["requests"].append(small)
    return spec


def gpu_pod(name: str, age: int = 0) -> Json:
    """A pending pod whose claim `gpu` is the ResourceClaim of its own name; older by `age` seconds."""
    return make_pod(name).req(cpu="1").named_claim("gpu", name).created(EPOCH - timedelta(seconds=age)).json()


def want(name: str, message: str | None = None, forecast: str | None = None) -> Json:
    """What `-o json` says of the unallocated claim `default/NAME` of the pod of that name: why no node can take it,
    and the device of the a100 or h100 pool the dry run gives it (`POOL/DEVICE`)."""
    pool, _, device = (forecast or "").partition("/")
    given = [{"request": "gpu", "driver": DRIVER, "pool": pool, "device": device}] if forecast else []
    return {
        "name": "gpu",
        "claim": f"default/{name}",
        "pods": [f"default/{name}"],
        "allocated": False,
        "devices": [],
        "forecast": given,
        "message": message,
    }


NO_LOWER_UNIT = "no unit below priority 0: raise the {}'s priority or add 1 node with free devices its claims select"


@pytest.mark.parametrize(
    ("claims", "pods", "explained", "want_claims", "want_lines", "want_unblock"),
    [
        pytest.param(
            [resource_claim("train", "default", one_of("a100"))],
            [gpu_pod("train")],
            "pod/train",
            [want("train", forecast="a100/gpu-0")],
            "  default/train (gpu of default/train): not allocated; the dry run allocates gpu: a100/gpu-0\n",
            "it fits now: the scheduler binds it on its next try (bound at 12:00:00Z in the dry run)",
            id="a claim a free device matches: the dry run names the device",
        ),
        pytest.param(
            [resource_claim(name, "default", one_of("a100")) for name in ("first", "second")],
            [gpu_pod("first", age=60), gpu_pod("second")],
            "pod/second",
            [want("second", "0/2 nodes are available: 2 cannot allocate all claims: request gpu.")],
            "  default/second (gpu of default/second): cannot be allocated now: 0/2 nodes are available: 2 cannot "
            "allocate all claims: request gpu.\n",
            NO_LOWER_UNIT.format("pod") + " (see Claims)",
            id="the older pod takes the one a100 first: the claim cannot be allocated, its request is named",
        ),
        pytest.param(
            [resource_claim("mixed", "default", two_requests())],
            [gpu_pod("mixed")],
            "pod/mixed",
            [want("mixed", "0/2 nodes are available: 2 cannot allocate all claims: request small.")],
            "  default/mixed (gpu of default/mixed): cannot be allocated now: 0/2 nodes are available: 2 cannot "
            "allocate all claims: request small.\n",
            "no node can take it (0/2 nodes are available: 2 cannot allocate all claims): add 1 node with free "
            "devices its claims select (see Claims)",
            id="of two requests, the one no node can meet is named",
        ),
        pytest.param(
            [resource_claim(f"w{i}", "default", one_of("h100")) for i in range(3)],
            [
                make_podgroup("train").gang(3).json(),
                *(make_pod(f"w{i}").req(cpu="1").group("train").named_claim("gpu", f"w{i}").json() for i in range(3)),
            ],
            "podgroup/train",
            [want("w0"), want("w1"), want("w2", "0/2 nodes are available: 2 cannot allocate all claims.")],
            "  default/w0 (gpu of default/w0): not allocated\n"
            "  default/w1 (gpu of default/w1): not allocated\n"
            "  default/w2 (gpu of default/w2): cannot be allocated now: 0/2 nodes are available: 2 cannot allocate all "
            "claims.\n",
            NO_LOWER_UNIT.format("PodGroup") + " (see Claims)",
            id="a gang of three for the two h100: the member left without says so, in its FitError",
        ),
    ],
)
def test_explain_shows_each_claim_and_why_it_cannot_be_allocated(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    claims: list[Json],
    pods: list[Json],
    explained: str,
    want_claims: list[Json],
    want_lines: str,
    want_unblock: str,
) -> None:
    args = [explained, "-f", devices_dump(tmp_path, claims, pods), "--now", NOW]
    code = main(["explain", *args, "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    document = json.loads(out)
    assert document["claims"] == want_claims
    assert [u["message"] for u in document["unblock"]] == [want_unblock]
    code = main(["explain", *args])
    text, err = capsys.readouterr()
    assert code == 0, err
    assert f"Claims:\n{want_lines}What would unblock it:\n" in text


def test_a_cluster_without_the_explain_api_is_listed_with_its_devices(
    apiserver: ApiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where the scheduler serves no explain API, the command lists the cluster itself: DeviceClasses, ResourceSlices
    and ResourceClaims too, so its dry run allocates the device the scheduler would."""
    apiserver.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    for objects in gpu_nodes().values():
        for obj in objects:
            apiserver.create(obj)
    apiserver.create(resource_claim("train", "default", one_of("a100")))
    apiserver.create(gpu_pod("train"))
    code = main(["explain", "pod", "train", "-o", "json", "--kubeconfig", str(apiserver.kubeconfig(tmp_path / "k"))])
    out, err = capsys.readouterr()
    assert code == 0, err
    (claim,) = json.loads(out)["claims"]
    assert claim["forecast"] == [{"request": "gpu", "driver": DRIVER, "pool": "a100", "device": "gpu-0"}]
