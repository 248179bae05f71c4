"""`phalanx status`: the same command as `kubectl phalanx status` (`phalanx/kubectl/cli.py`)."""

from __future__ import annotations

import argparse

from phalanx.kubectl.cli import add_status


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    add_status(subparsers, suppress=False)
