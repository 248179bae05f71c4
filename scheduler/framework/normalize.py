"""Score normalisation as kube-scheduler's `DefaultNormalizeScore` (framework/plugins/helper/normalize_score.go):
raw scores are scaled to 0..100 by the largest among the nodes scored (the feasible ones), in integers, and
reversed for scores where less is better (untolerated PreferNoSchedule taints)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from scheduler.framework.snapshot import BoolArray

MAX_NODE_SCORE = 100

FloatArray = npt.NDArray[np.float64]


def default_normalize(raw: npt.NDArray[np.int64], feasible: BoolArray, reverse: bool = False) -> FloatArray | None:
    """`raw` scaled to 0..100 over the feasible nodes; None when every feasible node ends with the same score."""
    top = int(raw[feasible].max()) if feasible.any() else 0
    if top == 0:
        return None
    scaled = MAX_NODE_SCORE * raw // top
    if reverse:
        scaled = MAX_NODE_SCORE - scaled
    if int(scaled[feasible].min()) == int(scaled[feasible].max()):
        return None
    return scaled.astype(np.float64)
