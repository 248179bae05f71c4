"""Victim importance: the column form the search uses makes the same keys as the per-unit form."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from scheduler.preemption.ordering import Importance, importance_key, importance_keys

# Few values of each field, so that random units tie often and every criterion gets to decide.
UNITS = st.builds(
    Importance,
    key=st.sampled_from(["ns/a", "ns/b", "other/a"]),
    priority=st.sampled_from([-(2**31), -1, 0, 10, 2**31 - 1]),
    whole_group=st.booleans(),
    pod_count=st.integers(1, 4),
    started_at=st.none() | st.sampled_from([0.0, 1.5, 1.7e9]),
)


@given(st.lists(UNITS, max_size=20))
def test_column_keys_agree_with_unit_keys(units: list[Importance]) -> None:
    want = [importance_key(u) for u in units]
    got = importance_keys(
        [u.key for u in units],
        np.array([u.priority for u in units], dtype=np.int64),
        np.array([u.whole_group for u in units], dtype=bool),
        np.array([u.pod_count for u in units], dtype=np.int64),
        np.array([np.nan if u.started_at is None else u.started_at for u in units], dtype=np.float64),
    )
    assert got == want
