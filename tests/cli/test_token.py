"""`osmo token` and the default pool against a live server."""

from __future__ import annotations

import json

import pytest

from osmo.accounts import services as accounts
from osmo.accounts.models import AccessToken
from tests import factories
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)

SPEC = "workflow:\n  name: quick\n  tasks:\n  - {name: t, image: x, command: [sleep, '1']}\n"


def test_token_create_list_revoke(cli, monkeypatch):
    cli.as_user(monkeypatch, "alice", "osmo-team-user")
    code, out, _ = cli("token", "create", "--name", "laptop")
    raw = out.strip()
    assert code == 0 and raw.startswith("osmo_") and len(out.splitlines()) == 1
    code, out, _ = cli("token", "list")
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "User", "Name", "Token", "Created", "Revoked"]
    assert lines[2].split()[1:4] == ["alice", "laptop", f"{raw[:12]}…"]
    token_id = json.loads(cli("token", "list", "-t", "json")[1])[0]["id"]
    assert cli("token", "revoke", str(token_id)) == (
        0, f"Revoked token {token_id} ({raw[:12]}…) of alice.\n", "")
    assert AccessToken.objects.get(pk=token_id).revoked_at is not None
    code, _, err = cli("token", "list", "--user", "bob")
    assert code == 1 and err.endswith("(forbidden)\n")
    cli.as_user(monkeypatch, "root", "osmo-admin")
    accounts.user_ensure(username="bob", groups=[])
    assert cli("token", "list", "--user", "bob") == (0, "No access tokens.\n", "")


def test_submit_without_pool_uses_the_default_pool(cli, monkeypatch, tmp_path):
    team = factories.pool("team", 16)
    factories.subpool(team, "a", 8)
    cli.as_user(monkeypatch, "alice", "osmo-team-user")
    spec = tmp_path / "quick.yaml"
    spec.write_text(SPEC)
    code, _, err = cli("workflow", "submit", str(spec))
    assert (code, err) == (2, "error: no --pool given and no default pool set: pass --pool NAME, "
                              "or set one with `osmo pool default NAME` (`osmo pool list` shows "
                              "the pools)\n")
    assert Workflow.objects.count() == 0
    assert cli("pool", "default") == (0, "No default pool.\n", "")
    assert cli("pool", "default", "team--a") == (0, "Default pool: team--a\n", "")
    code, out, _ = cli("workflow", "submit", str(spec))
    assert (code, Workflow.objects.get().pool.name) == (0, "team--a")
    assert out.startswith("Submitted quick-1 in pool team--a")
