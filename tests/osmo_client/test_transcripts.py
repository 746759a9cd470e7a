"""The replays send what NVIDIA's client sent: every request of the recorded transcripts
(``transcripts/osmo-6.4.0.json``) — its method, its path (names of workflows, pools, nodes,
tokens and users taken as placeholders), the keys of its query and of its JSON body — is among
the requests the replay tests of this directory sent in the same run (``replay.SENT``).

It runs after them (``conftest.py`` orders it last); alone it has nothing to compare and skips,
saying so."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qsl

import pytest

from . import replay

TRANSCRIPTS = Path(__file__).resolve().parent / "transcripts" / "osmo-6.4.0.json"
# The path words of the API; any other segment is a name (a workflow, pool, node, token, user).
WORDS = {"api", "auth", "jwt", "access_token", "version", "pool_quota", "pool", "profile",
         "settings", "workflow", "logs", "error_logs", "events", "spec", "task", "resources",
         "user", "cancel", "restart", "tag", "roles", "configs", "history",
         "diff", "rollback", "revision", "tags", "backend"}


def shape(method: str, path: str, query: list[tuple[str, str]] | str, body) -> tuple:
    # the recorder collapsed leading slashes (`//api/pool_quota`): compare without them
    segments = [s if s in WORDS else "*" for s in path.split("/") if s]
    pairs = parse_qsl(query, keep_blank_values=True) if isinstance(query, str) else query
    keys = tuple(sorted(body)) if isinstance(body, dict) else None
    return method, "/".join(segments), tuple(sorted({k for k, _ in pairs})), keys


def recorded() -> list[tuple[str, tuple]]:
    commands = json.loads(TRANSCRIPTS.read_text())["commands"]
    return [(c["command"], shape(r["method"], r["path"], r["query"], r["body"]))
            for c in commands for r in c["requests"]]


def test_the_transcripts_hold_the_commands_the_replays_cover() -> None:
    commands = {c["command"].split()[1] + " " + c["command"].split()[2]
                for c in json.loads(TRANSCRIPTS.read_text())["commands"]
                if len(c["command"].split()) > 2}
    assert {"workflow submit", "workflow list", "workflow query", "workflow cancel",
            "workflow logs", "workflow events", "workflow spec", "workflow restart",
            "pool list", "profile list", "task list", "resource list", "resource info",
            "token set", "token list", "token delete", "user list", "user get",
            "config list", "config history", "config show", "config diff",
            "config rollback", "config tag", "config update"} <= commands


def test_every_recorded_request_is_one_the_replays_send() -> None:
    if not replay.SENT:
        pytest.skip("compares with the replay tests of tests/osmo_client run before it")
    sent = {shape(*request) for request in replay.SENT}
    missing = [(command, request) for command, request in recorded() if request not in sent]
    assert missing == []
