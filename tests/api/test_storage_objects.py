"""The storage kinds a real kube-apiserver 1.36 serves, as `kubectl get ... -o json` dumps them, parse into our models,
survive a round trip and read as kube-scheduler reads them."""

from __future__ import annotations

from scheduler.api.csi import CSIDriver, CSINode
from scheduler.api.manifest import parse_object, read_documents
from scheduler.api.persistent_volume import PersistentVolume
from scheduler.api.persistent_volume_claim import PersistentVolumeClaim
from scheduler.api.storage_class import StorageClass
from tests.recorded import RECORDED

DUMP = RECORDED / "objects" / "storage-list-kubectl.json"


def parsed() -> dict[tuple[str, str], object]:
    found = {}
    for raw, source in read_documents(DUMP):
        obj = parse_object(raw, source)
        assert obj is not None, f"{raw['kind']} is read, not skipped"
        assert obj.to_json() == raw, "a parsed object must serialise back to what the apiserver sent"
        found[(raw["kind"], raw["metadata"]["name"])] = obj
    return found


def test_every_storage_kind_of_the_dump_round_trips() -> None:
    kinds = {kind for kind, _ in parsed()}
    assert kinds == {"PersistentVolume", "PersistentVolumeClaim", "StorageClass", "CSINode", "CSIDriver"}


def test_claims_read_as_kube_scheduler_reads_them() -> None:
    objects = parsed()
    data = objects[("PersistentVolumeClaim", "data")]
    assert isinstance(data, PersistentVolumeClaim)
    assert data.is_bound, "bound by the PV controller: volumeName and pv.kubernetes.io/bind-completed"
    assert data.storage_class == "local" and data.requested_bytes() == 10 * 2**30
    lazy = objects[("PersistentVolumeClaim", "lazy")]
    assert isinstance(lazy, PersistentVolumeClaim) and not lazy.is_bound
    assert lazy.spec.access_modes == ["ReadWriteOncePod"]
    scratch = objects[("PersistentVolumeClaim", "eph-scratch")]
    assert isinstance(scratch, PersistentVolumeClaim)
    assert [(o.kind, o.name, o.controller) for o in scratch.metadata.owner_references] == [("Pod", "eph", True)]


def test_volumes_classes_and_csi_objects_read_as_kube_scheduler_reads_them() -> None:
    objects = parsed()
    local = objects[("PersistentVolume", "local-1")]
    assert isinstance(local, PersistentVolume) and local.spec.node_affinity is not None
    assert local.spec.node_affinity.required is not None
    (term,) = local.spec.node_affinity.required.node_selector_terms
    assert [(e.key, e.operator, e.values) for e in term.match_expressions] == [
        ("kubernetes.io/hostname", "In", ["node-1"])
    ]
    assert local.spec.claim_ref is not None and local.spec.claim_ref.name == "data"
    lazy = objects[("StorageClass", "lazy")]
    assert isinstance(lazy, StorageClass) and lazy.waits_for_first_consumer
    immediate = objects[("StorageClass", "local")]
    assert isinstance(immediate, StorageClass) and not immediate.waits_for_first_consumer, "defaulted to Immediate"
    node = objects[("CSINode", "node-0")]
    assert isinstance(node, CSINode) and node.limits() == {"ebs.csi.aws.com": 25}
    driver = objects[("CSIDriver", "ebs.csi.aws.com")]
    assert isinstance(driver, CSIDriver) and driver.attach_required
