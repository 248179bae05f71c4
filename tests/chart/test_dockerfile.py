"""The image (no Docker daemon in CI): every package the distribution ships is copied in, and it runs non-root."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(maxsplit=1)[0].upper(), line.split(maxsplit=1)[1]) for line in lines]


def test_every_shipped_package_reaches_the_image() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = [p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]]
    copies = {args for op, args in _instructions() if op == "COPY"}
    ignore = (ROOT / ".dockerignore").read_text().splitlines()
    for package in packages:
        assert f"{package} ./{package}" in copies, f"Dockerfile does not COPY {package}"
        assert f"!{package}/" in ignore, f".dockerignore excludes {package}"
    assert "!pyproject.toml" in ignore and "!README.md" in ignore, "pip install . needs both"


def test_runs_phalanx_as_the_non_root_user_the_chart_expects() -> None:
    instructions = _instructions()
    final_stage = instructions[max(i for i, (op, _) in enumerate(instructions) if op == "FROM") :]
    values = yaml.safe_load((ROOT / "charts" / "phalanx" / "values.yaml").read_text())
    user = f"{values['podSecurityContext']['runAsUser']}:{values['podSecurityContext']['runAsGroup']}"
    assert ("USER", user) in final_stage
    assert ("ENTRYPOINT", '["phalanx"]') in final_stage
    assert all("slim" in args or args.startswith("${PYTHON_IMAGE}") for op, args in instructions if op == "FROM")
    assert any(op == "ARG" and args.startswith("PYTHON_IMAGE=python:3.11-slim") for op, args in instructions)
