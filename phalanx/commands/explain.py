"""`phalanx explain`: the same command as `kubectl phalanx explain` (`phalanx/kubectl/cli.py`)."""

from __future__ import annotations

import argparse

from phalanx.kubectl.cli import add_explain


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add_explain(subparsers, suppress=False)
