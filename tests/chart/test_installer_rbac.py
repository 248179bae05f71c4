"""docs/install-rbac.yaml holds every right the chart's roles grant, for every worked set of values.

Kubernetes refuses to create a Role or ClusterRole granting a right its creator lacks (RBAC escalation
prevention), so an installer bound only to that file could not install a chart whose roles grew. The
release namespace's Roles may also draw on the built-in `admin` role the file binds there, which holds
Secrets. tests/e2e/test_lifecycle.py installs the chart as a user bound to exactly that file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.conftest import CHART, NAMESPACE, Helm
from tests.chart.rbac import Access, Grant

VALUE_SETS = [None, *sorted(p.name for p in (CHART / "ci").glob("*-values.yaml"))]
INSTALLER = Path(__file__).resolve().parents[2] / "docs" / "install-rbac.yaml"
HELD_THROUGH_ADMIN = {("", "secrets")}
"""Rights of the built-in `admin` role that the chart's namespaced Roles use."""
Doc = dict[str, Any]


def _rules(role: Doc) -> list[Grant]:
    label = f"{role['kind']}/{role['metadata']['name']}"
    return [
        Grant(label, "*", group, resource, verb, name)
        for rule in role.get("rules") or []
        for group in rule.get("apiGroups") or []
        for resource in rule.get("resources") or []
        for verb in rule["verbs"]
        for name in rule.get("resourceNames") or [""]
    ]


def _installer() -> dict[str, list[Grant]]:
    docs = [d for d in yaml.safe_load_all(INSTALLER.read_text()) if d]
    return {d["metadata"]["name"]: _rules(d) for d in docs if d["kind"] == "ClusterRole"}


@pytest.mark.parametrize("values", VALUE_SETS)
def test_the_installer_holds_every_right_the_chart_grants(helm: Helm, values: str | None) -> None:
    installer = _installer()
    cluster_wide = installer["phalanx-installer"]
    in_namespace = cluster_wide + installer["phalanx-installer-namespace"]
    lacking = []
    for role in (d for d in helm.template(values) if d["kind"] in ("ClusterRole", "Role")):
        held = cluster_wide if role["kind"] == "ClusterRole" else in_namespace
        namespace = "" if role["kind"] == "ClusterRole" else NAMESPACE
        for grant in _rules(role):
            access = Access(grant.verb, grant.group, grant.resource, namespace, grant.name)
            through_admin = namespace and (grant.group, grant.resource) in HELD_THROUGH_ADMIN
            if not through_admin and not any(g.covers(access) for g in held):
                lacking.append(str(grant))
    assert not lacking, f"docs/install-rbac.yaml lacks rights the chart grants ({values or 'default values'}):\n" + (
        "\n".join(lacking)
    )
