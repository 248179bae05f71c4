"""ImageLocality: prefer nodes that already hold the pod's container images, weighed by how widely each image is
spread.

Source: kube-scheduler `plugins/imagelocality/image_locality.go` (weight 1 in its default profile): for each
container (init ones too) whose image a node lists in `status.images` (an image named without tag or digest is
`:latest`), the image's size times the share of nodes that hold it; the sum, clamped between 23 MB and 1,000 MB
per container, is scaled to 0..100. It reads no pod, so it is kept per image list until a Node changes, and
asked per pod as the normalised scores are (`PodScorePlugin`).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from scheduler.api.node import Node
from scheduler.framework.cycle_state import CycleState
from scheduler.framework.node_derived import node_derived
from scheduler.framework.normalize import FloatArray
from scheduler.framework.pod_info import PodInfo
from scheduler.framework.snapshot import BoolArray, IntArray, Snapshot

MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def normalized_image_name(name: str) -> str:
    """`name:latest` for a name with neither tag nor digest, as the kubelet reports it."""
    last = name.rsplit("/", 1)[-1]
    return name if ":" in last or "@" in name else f"{name}:latest"


def _spread_sizes(nodes: tuple[Node, ...], images: tuple[str, ...]) -> IntArray:
    """Per node, the sum over `images` it holds of size x (nodes holding it / all nodes)."""
    held: list[dict[str, int]] = [
        {normalized_image_name(n): image.size_bytes for image in node.status.images for n in image.names}
        for node in nodes
    ]
    spread = Counter(name for sizes in held for name in sizes if name in images)
    total = max(len(nodes), 1)
    return np.fromiter(
        (sum(int(sizes[i] * spread[i] / total) for i in images if i in sizes) for sizes in held),
        dtype=np.int64,
        count=len(nodes),
    )


class ImageLocality:
    name = "ImageLocality"
    weight = 1

    def pod_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, feasible: BoolArray) -> object:
        """Kept per image list and set of Node objects: the score reads no pod, so placements never change it."""
        spec = pod.pod.spec
        containers = (*spec.init_containers, *spec.containers)
        images = tuple(normalized_image_name(c.image) for c in containers if c.image)
        if not images:
            return None
        scores = node_derived(
            snapshot, ("ImageLocality", images, len(containers)), lambda nodes: _scores(nodes, images, len(containers))
        )
        if scores is None or not feasible.any() or scores[feasible].min() == scores[feasible].max():
            return None
        return scores


def _scores(nodes: tuple[Node, ...], images: tuple[str, ...], containers: int) -> FloatArray | None:
    """The scores, or None when every node scores the same (no node holds the images, or every one does)."""
    top = MAX_CONTAINER_THRESHOLD * containers
    clamped = np.clip(_spread_sizes(nodes, images), MIN_THRESHOLD, top)
    scores = (100 * (clamped - MIN_THRESHOLD) // (top - MIN_THRESHOLD)).astype(np.float64)
    return None if not len(scores) or scores.min() == scores.max() else scores
