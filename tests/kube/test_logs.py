"""`phalanx scheduler` logs carry no credential and no frame locals (docs/DESIGN.md, invariant 8; issue 11, defect 5).

The real CLI process runs against the loopback server with a distinctive bearer token in its
kubeconfig; the server then makes one unit's write fail, either refused (a 422 the client raises
from inside its request, where the headers with the token are frame locals) or answered with a
malformed object our models cannot read (a bug-like error, logged with its traceback). In both log
formats the token never appears, and the error's record (its line plus its traceback) stays short.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.apiserver import ApiServer
from tests.apiserver.server import status_body
from tests.builders import make_node, make_pod, make_priority_class
from tests.kube.replica import CliReplica, Replica, fast_config
from tests.polling import wait_for

TOKEN = "phalanx-test-token-6f1d0c9e2b7a4d58"
RECORD_LIMIT = 100
CONSOLE_RECORD = re.compile(r"^\d{4}-\d\d-\d\dT\S+ \[")


def kubeconfig_with_token(server: ApiServer, path: Path) -> Path:
    config = json.loads(server.kubeconfig(path).read_text())
    config["users"][0]["user"]["token"] = TOKEN
    path.write_text(json.dumps(config))
    return path


def console_records(text: str) -> list[list[str]]:
    """Each record: its line, then the lines (a traceback) up to the next record."""
    records: list[list[str]] = []
    for line in text.splitlines():
        if CONSOLE_RECORD.match(line) or not records:
            records.append([line])
        else:
            records[-1].append(line)
    return records


def error_record(text: str, log_format: str, event: str) -> list[str]:
    """The first record whose event contains `event`, as lines (a JSON record's traceback unfolded)."""
    if log_format == "json":
        for line in text.splitlines():
            if not line.startswith("{"):
                continue
            record = json.loads(line)
            if event in record.get("event", ""):
                return [line, *str(record.get("exception", "")).splitlines()]
        return []
    return next((r for r in console_records(text) if event in r[0]), [])


@pytest.mark.parametrize("log_format", ["console", "json"])
@pytest.mark.parametrize(
    ("fault", "event"),
    [
        pytest.param("refused", "refused", id="a write refused with 422"),
        pytest.param("malformed", "failed", id="a write answered with a malformed object"),
    ],
)
def test_a_failing_write_logs_no_token_and_a_short_record(
    apiserver: ApiServer, tmp_path: Path, replicas: list[Replica | CliReplica], log_format: str, fault: str, event: str
) -> None:
    apiserver.create(make_priority_class("low", 10).json())
    apiserver.create(make_priority_class("high", 1000).json())
    apiserver.create(make_node("n0").cap(cpu="4", memory="8Gi").json())
    apiserver.create(make_pod("victim").req(cpu="4").priority_class("low").on("n0").json())
    apiserver.create(make_pod("urgent").req(cpu="4").priority_class("high").json())
    if fault == "refused":
        body = status_body(422, "Invalid", 'Pod "victim" is invalid: refused by a test', {"name": "victim"})
        apiserver.fail("PATCH", "/api/v1/namespaces/default/pods/victim/status", 422, times=10_000, body=body)
    else:
        apiserver.fail("PATCH", "/api/v1/namespaces/default/pods/urgent/status", 200, times=10_000, body={"spec": 1})
    kubeconfig = kubeconfig_with_token(apiserver, tmp_path / "kubeconfig")
    env = {"PHALANX_LOG_FORMAT": log_format}
    cli = CliReplica(tmp_path, kubeconfig, fast_config(), "logs", env=env).start()
    replicas.append(cli)
    record = wait_for(lambda: error_record(cli.log(), log_format, event), timeout=30)
    assert cli.terminate() == 0
    text = cli.log()
    assert TOKEN not in text
    assert len(record) < RECORD_LIMIT, "\n".join(record[:20])
    if fault == "malformed":
        assert "Traceback" in "\n".join(record), "a bug's record keeps its traceback, without locals"
