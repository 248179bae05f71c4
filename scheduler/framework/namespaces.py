"""Namespaces as a pass sees them: each one's labels, which a pod affinity term's `namespaceSelector` selects by.

kube-scheduler reads them from a Namespace informer (`interpodaffinity/plugin.go`): an incoming pod's term
gets the namespaces its selector lists (`mergeAffinityTermNamespacesIfNotEmpty`), and a running pod's term is
matched against the labels of the incoming pod's namespace (`GetNamespaceLabelsSnapshot`, none when the
namespace is not found). Here every term is resolved the first way (`pod_terms.term_of`), which gives the same
answers, so matching a pod against any term is a set lookup. A namespace without a Namespace object (a
hand-written scenario's) has no labels. The same object serves every pass until some namespace's labels change,
so what was derived from it (resolved terms, the running pods' terms by node) is kept until then.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from scheduler.api.namespace import Namespace


class LabelMatcher(Hashable, Protocol):
    def matches(self, labels: Mapping[str, str]) -> bool: ...


@dataclass(slots=True)
class Namespaces:
    labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Per Namespace object, by name, its labels (`Namespace.labels`)."""
    names: frozenset[str] = field(init=False, compare=False)
    """The namespaces that have an object."""
    _selected: dict[LabelMatcher, frozenset[str]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.names = frozenset(self.labels)
        self._selected = {}

    def selected(self, selector: LabelMatcher) -> frozenset[str]:
        """The namespaces with an object whose labels `selector` matches (asked once per selector)."""
        found = self._selected.get(selector)
        if found is None:
            found = self._selected[selector] = frozenset(
                name for name, labels in self.labels.items() if selector.matches(labels)
            )
        return found

    def kept(self, objects: Mapping[str, Namespace]) -> Namespaces:
        """These namespaces if `objects` labels them all the same, else new ones from `objects`."""
        labels = {name: namespace.labels for name, namespace in objects.items()}
        return self if labels == self.labels else Namespaces(labels)
