"""`status -l`: kubectl's equality-based label selector over units, the same wherever the summary is computed.

`k=v`, `k==v`, `k!=v`, `k`, `!k`, comma-separated, all of which must hold (k8s.io/apimachinery `labels.Parse`'s
equality subset). A unit matches when its PodGroup or any of its members does.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduler.explain.units import Unit


@dataclass(frozen=True, slots=True)
class Term:
    op: str
    """`=`, `!=`, `!` (absent) or `` (present)."""
    key: str
    value: str = ""

    def holds(self, labels: dict[str, str]) -> bool:
        if self.op == "!=":
            return labels.get(self.key) != self.value
        if self.op == "=":
            return labels.get(self.key) == self.value
        if self.op == "!":
            return self.key not in labels
        return self.key in labels


def parse(text: str) -> tuple[Term, ...]:
    terms = []
    for term in (t.strip() for t in text.split(",") if t.strip()):
        if "!=" in term:
            key, value = term.split("!=", 1)
            terms.append(Term("!=", key.strip(), value.strip()))
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            terms.append(Term("=", key.strip(), value.strip()))
        elif term.startswith("!"):
            terms.append(Term("!", term[1:].strip()))
        else:
            terms.append(Term("", term))
    return tuple(terms)


def matches(terms: tuple[Term, ...], unit: Unit) -> bool:
    """The unit's PodGroup or one of its members has labels that satisfy every term."""
    labelled = [m.pod.metadata.labels for m in unit.members]
    if unit.group is not None:
        labelled.insert(0, unit.group.metadata.labels)
    return any(all(t.holds(labels) for t in terms) for labels in labelled)
