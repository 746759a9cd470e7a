"""`osmo credential` and `osmo app` against a live server: what they print, and that no
command prints a credential's value."""

from __future__ import annotations

import json

import pytest

from tests import factories
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)
SECRET = "s3cr3t-Value-9f2c71"
SPEC = "workflow:\n  name: quick\n  tasks:\n  - {name: t, image: x, command: [sleep, '1']}\n"


def test_credential_set_list_delete(cli, monkeypatch, tmp_path):
    cli.as_user(monkeypatch, "alice", "osmo-team-user")
    outputs = []
    result = cli("credential", "set", "omni", "--type", "GENERIC", "--payload", "user=me",
                 f"pass={SECRET}")
    assert result == (0, "Set GENERIC credential omni.\n", "")
    key_file = tmp_path / "key"
    key_file.write_text(SECRET)
    result = cli("credential", "set", "ngc", "--type", "REGISTRY", "--payload-file",
                 f"auth={key_file}")
    assert result[0] == 0
    outputs.append(result)
    code, out, err = cli("credential", "list")
    outputs.append((code, out, err))
    assert code == 0
    assert [line.split() for line in out.splitlines()[2:]] == [
        ["ngc", "REGISTRY", "docker.io", "auth"], ["omni", "GENERIC", "-", "user,", "pass"]]
    listed = json.loads(cli("credential", "list", "-t", "json")[1])
    assert [c["cred_name"] for c in listed["credentials"]] == ["ngc", "omni"]
    outputs.append(cli("credential", "set", "bad", "--type", "DATA", "--payload",
                       f"access_key={SECRET}"))
    assert outputs[-1][0] == 1 and "endpoint" in outputs[-1][2]
    assert cli("credential", "delete", "omni") == (0, "Deleted credential omni.\n", "")
    assert cli("credential", "delete", "omni")[0] == 1
    assert SECRET not in repr(outputs)


def test_app_create_update_submit(cli, monkeypatch, tmp_path):
    cli.as_user(monkeypatch, "alice", "osmo-team-user")
    factories.pool("team", 8)
    first = tmp_path / "v1.yaml"
    first.write_text(SPEC)
    second = tmp_path / "v2.yaml"
    second.write_text(SPEC.replace("quick", "quicker"))
    assert cli("app", "create", "hello", "-d", "says hello", "-f", str(first)) == (
        0, "App hello created (version 1).\n", "")
    assert cli("app", "update", "hello", "-f", str(second)) == (
        0, "App hello updated: version 2.\n", "")
    assert cli("app", "spec", "hello:1") == (0, SPEC, "")
    code, out, _ = cli("app", "info", "hello")
    assert code == 0 and "Owner: alice" in out
    assert [line.split()[:2] for line in out.splitlines()[-2:]] == [["1", "alice"],
                                                                    ["2", "alice"]]
    code, out, _ = cli("app", "list")
    assert out.splitlines()[2].split()[:2] == ["alice", "hello"]
    code, out, _ = cli("app", "submit", "hello:1", "--pool", "team")
    assert code == 0, out
    workflow = Workflow.objects.get()
    assert (workflow.name, workflow.app_name, workflow.app_version) == ("quick-1", "hello", 1)
    assert out == "Submitted quick-1 from app hello version 1 to pool team: PENDING\n"
    assert cli("app", "spec", "hello:7")[0] == 1  # 404
    assert cli("app", "rename", "hello", "hi") == (0, "App hello renamed to hi.\n", "")
    assert cli("app", "delete", "hi", "--all") == (
        0, "Deleted app hi version 1.\nDeleted app hi version 2.\n", "")
    bad = tmp_path / "bad.yaml"
    bad.write_text("workflow: [unclosed\n")
    code, _, err = cli("app", "create", "broken", "-d", "x", "-f", str(bad))
    assert code == 1 and "invalid_spec" in err
