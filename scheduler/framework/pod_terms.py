"""Pod terms: which pods a pod's affinity, anti-affinity or spread constraint is about, as hashable values.

A `PodTerm` is a label selector over pods, the namespaces it looks in and the node label that makes a topology
domain, resolved as kube-scheduler resolves them (`framework/types.go` `newAffinityTerm`, and the
`matchLabelKeys`/`mismatchLabelKeys` merge of KEP-3633 and KEP-3243, which the API server also makes at create
time: merging again is harmless). A `namespaceSelector` is resolved into the namespaces whose labels it matches
(`namespaces.py`), as kube-scheduler resolves the incoming pod's. Being hashable, a term keys the per-node counts
of the pods it matches (`pod_counts.py`), so 10,000 replicas of one Deployment share one count; a namespace
relabelled makes the terms that select by labels new terms, counted afresh.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduler.api.meta import LabelSelector
from scheduler.api.pod import Pod, PodAffinityTerm
from scheduler.framework.namespaces import Namespaces
from scheduler.framework.pod_info import PodInfo

Requirement = tuple[str, str, tuple[str, ...]]
"""A selector requirement: (label key, operator, values), `matchLabels` entries as `In` of one value."""


@dataclass(frozen=True, slots=True)
class Selector:
    """A label selector as a value. `nothing` is the nil selector, which selects no pod (upstream's
    `labels.Nothing()`); an empty one selects every pod."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False
    pairs: dict[str, str] | None = field(default=None, init=False, compare=False, hash=False, repr=False)
    """The labels a selector of equalities only (`matchLabels`, the common case) requires, matched as one
    dictionary-view comparison: terms are matched against every pod of a node."""

    def __post_init__(self) -> None:
        if all(op == "In" and len(values) == 1 for _, op, values in self.requirements):
            keys = [key for key, _, _ in self.requirements]
            if len(set(keys)) == len(keys):
                object.__setattr__(self, "pairs", {key: values[0] for key, _, values in self.requirements})

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.nothing:
            return False
        if self.pairs is not None:
            return self.pairs.items() <= labels.items()
        for key, operator, values in self.requirements:
            value = labels.get(key)
            if operator == "In":
                if value is None or value not in values:
                    return False
            elif operator == "NotIn":
                if value is not None and value in values:
                    return False
            elif operator == "Exists":
                if value is None:
                    return False
            elif operator == "DoesNotExist":
                if value is not None:
                    return False
            else:
                return False
        return True


NOTHING = Selector(nothing=True)


def selector_of(
    selector: LabelSelector | None,
    labels: Mapping[str, str] = {},
    match_label_keys: tuple[str, ...] | list[str] = (),
    mismatch_label_keys: tuple[str, ...] | list[str] = (),
) -> Selector:
    """`selector` with the owner's values of `match_label_keys` required and of `mismatch_label_keys` refused
    (keys the owner lacks are skipped, as upstream)."""
    if selector is None:
        return NOTHING
    requirements: list[Requirement] = [(k, "In", (v,)) for k, v in selector.match_labels.items()]
    requirements += [(e.key, e.operator, tuple(sorted(e.values))) for e in selector.match_expressions]
    requirements += [(k, "In", (labels[k],)) for k in match_label_keys if k in labels]
    requirements += [(k, "NotIn", (labels[k],)) for k in mismatch_label_keys if k in labels]
    return Selector(tuple(sorted(set(requirements))))


@dataclass(frozen=True, slots=True)
class PodTerm:
    """Pods in `namespaces` (None: every namespace) whose labels `selector` matches, counted per domain of
    the node label `topology_key`."""

    namespaces: frozenset[str] | None
    selector: Selector
    topology_key: str
    unlisted: frozenset[str] | None = None
    """When a `namespaceSelector` matches a namespace without labels: the namespaces that have a Namespace object,
    and every other namespace is in the term too (one without an object has no labels)."""

    def matches(self, info: PodInfo) -> bool:
        namespaces = self.namespaces
        return (
            namespaces is None
            or info.namespace in namespaces
            or (self.unlisted is not None and info.namespace not in self.unlisted)
        ) and self.selector.matches(info.labels)


def term_of(owner: Pod, term: PodAffinityTerm, namespaces: Namespaces) -> PodTerm:
    """A pod's affinity term resolved against the pod that holds it and the cluster's `namespaces`: no
    `namespaces` and no `namespaceSelector` means the owner's namespace; an empty `namespaceSelector` means every
    namespace; a non-empty one adds to `namespaces` those whose labels it matches (upstream's
    `GetNamespacesFromPodAffinityTerm` and `mergeAffinityTermNamespacesIfNotEmpty`)."""
    listed: frozenset[str] | None
    unlisted: frozenset[str] | None = None
    if term.namespace_selector is not None:
        by_labels = selector_of(term.namespace_selector)
        if by_labels.requirements:
            listed = frozenset(term.namespaces) | namespaces.selected(by_labels)
            if by_labels.matches({}):
                unlisted = namespaces.names
        else:
            listed = None
    elif term.namespaces:
        listed = frozenset(term.namespaces)
    else:
        listed = frozenset({owner.metadata.namespace or "default"})
    selector = selector_of(term.label_selector, owner.metadata.labels, term.match_label_keys, term.mismatch_label_keys)
    return PodTerm(listed, selector, term.topology_key, unlisted)


def required_affinity(pod: Pod, namespaces: Namespaces) -> tuple[PodTerm, ...]:
    affinity = pod.spec.affinity
    rules = affinity.pod_affinity if affinity else None
    terms = rules.required_during_scheduling_ignored_during_execution if rules else []
    return tuple(term_of(pod, t, namespaces) for t in terms)


def required_anti_affinity(pod: Pod, namespaces: Namespaces) -> tuple[PodTerm, ...]:
    affinity = pod.spec.affinity
    rules = affinity.pod_anti_affinity if affinity else None
    terms = rules.required_during_scheduling_ignored_during_execution if rules else []
    return tuple(term_of(pod, t, namespaces) for t in terms)


HeldTerm = tuple[int, PodTerm]
"""A term a running pod holds towards pods that come after it, with what it adds to their score in its domain:
a required anti-affinity term is 0 (a filter, not a score), a required affinity term +1 (upstream's
`hardPodAffinityWeight`), a preferred one plus or minus its weight (anti-affinity subtracts)."""

HARD_POD_AFFINITY_WEIGHT = 1


def held_terms(pod: Pod, namespaces: Namespaces) -> tuple[HeldTerm, ...]:
    """Every term of `pod` that matters to the pods scheduled after it (InterPodAffinity's existing-pod side)."""
    affinity = pod.spec.affinity
    if affinity is None or (affinity.pod_affinity is None and affinity.pod_anti_affinity is None):
        return ()
    held: list[HeldTerm] = []
    together, apart = affinity.pod_affinity, affinity.pod_anti_affinity
    if apart is not None:
        held += [(0, term_of(pod, t, namespaces)) for t in apart.required_during_scheduling_ignored_during_execution]
        held += [
            (-w.weight, term_of(pod, w.pod_affinity_term, namespaces))
            for w in apart.preferred_during_scheduling_ignored_during_execution
        ]
    if together is not None:
        held += [
            (HARD_POD_AFFINITY_WEIGHT, term_of(pod, t, namespaces))
            for t in together.required_during_scheduling_ignored_during_execution
        ]
        held += [
            (w.weight, term_of(pod, w.pod_affinity_term, namespaces))
            for w in together.preferred_during_scheduling_ignored_during_execution
        ]
    return tuple(held)


def preferred_terms(pod: Pod, namespaces: Namespaces) -> tuple[tuple[int, PodTerm], ...]:
    """The pod's own preferred terms with their signed weights (anti-affinity negative)."""
    affinity = pod.spec.affinity
    if affinity is None:
        return ()
    out: list[tuple[int, PodTerm]] = []
    for sign, rules in ((1, affinity.pod_affinity), (-1, affinity.pod_anti_affinity)):
        if rules is not None:
            out += [
                (sign * w.weight, term_of(pod, w.pod_affinity_term, namespaces))
                for w in rules.preferred_during_scheduling_ignored_during_execution
            ]
    return tuple(out)
