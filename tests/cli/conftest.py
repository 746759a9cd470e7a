from __future__ import annotations

import pytest

from osmo.accounts import services as accounts
from osmo.cli.main import main
from tests import factories


class Cli:
    """Runs `osmo ...` in-process against the live server, as a user with a token."""

    def __init__(self, capsys, url: str):
        self.capsys = capsys
        self.url = url

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        self.capsys.readouterr()
        code = main(list(argv))
        out, err = self.capsys.readouterr()
        return code, out, err

    def as_user(self, monkeypatch, username: str, *groups: str) -> str:
        user = accounts.user_ensure(username=username, groups=list(groups))
        token = accounts.token_issue(user=user)
        monkeypatch.setenv("OSMO_URL", self.url)
        monkeypatch.setenv("OSMO_TOKEN", token)
        return token


@pytest.fixture
def cli(live_server, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("OSMO_CONFIG", str(tmp_path / "config" / "osmo.json"))
    monkeypatch.delenv("OSMO_URL", raising=False)
    monkeypatch.delenv("OSMO_TOKEN", raising=False)
    return Cli(capsys, live_server.url)


@pytest.fixture
def seed_team():
    """Seed 002's example (LOW work added: it must not show in Used)."""
    team = factories.pool("team", 100)
    subpools = {name: factories.subpool(team, name, gpus)
                for name, gpus in (("a", 30), ("b", 40), ("c", 20))}
    factories.running_workflow(team, 50, "NORMAL")
    factories.running_workflow(team, 8, "LOW")
    factories.running_workflow(subpools["a"], 5, "HIGH")
    factories.running_workflow(subpools["b"], 10, "NORMAL")
    factories.running_workflow(subpools["b"], 3, "LOW")
    return team
