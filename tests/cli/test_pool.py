"""`osmo login` and `osmo pool ...` against a live server: the seed's table byte for byte,
messages, exit codes, and nothing changed on a refusal."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from osmo.embedded import free_port
from pools.models import Pool, PoolEvent, SubpoolState
from tests import factories

pytestmark = pytest.mark.django_db(transaction=True)

# Seed 002's table (its six columns as they are), then the LOW columns that the fixture's LOW
# work brings (LOW never shows in Used).
SEED_002_TABLE = """\
Pool            Status         Subpool State  GPU Quota        Used  Available  LOW  Total Usage
--------------  -------------  -------------  ---------------  ----  ---------  ---  -----------
team            ONLINE         -              10 (Total: 100)  50    -40        8    58
├─ team--a      ONLINE         ACTIVE         30               5     25         0    5
├─ team--b      ONLINE         ACTIVE         40               10    30         3    13
└─ team--c      ONLINE         ACTIVE         20               0     20         0    0
"""


def pools_state() -> tuple:
    return list(Pool.objects.order_by("pk").values()), PoolEvent.objects.count()


# --- login -------------------------------------------------------------------------------------

def test_login_stores_a_private_profile(cli, monkeypatch):
    token = cli.as_user(monkeypatch, "alice", "osmo-team-user")
    monkeypatch.delenv("OSMO_URL")
    monkeypatch.delenv("OSMO_TOKEN")
    assert cli("pool", "list")[0] == 2  # not logged in yet
    code, out, err = cli("login", "--url", cli.url + "/", "--token", token)
    assert (code, err) == (0, "")
    path = Path(os.environ["OSMO_CONFIG"])
    assert out == f"Logged in to {cli.url} as alice (saved in {path}).\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {
        "current": "default",
        "profiles": {"default": {"url": cli.url, "token": token, "user": "alice"}}}
    code, out, _ = cli("pool", "list")  # uses the stored profile (no pool exists yet)
    assert (code, out) == (0, "No pool is visible to you: you have no role in any pool.\n")


def test_a_second_login_warns_that_it_replaces_the_first(cli, monkeypatch):
    alice = cli.as_user(monkeypatch, "alice", "osmo-team-user")
    bob = cli.as_user(monkeypatch, "bob", "osmo-team-user")
    monkeypatch.delenv("OSMO_URL")
    monkeypatch.delenv("OSMO_TOKEN")
    assert cli("login", "--url", cli.url, "--token", alice)[0] == 0
    assert cli("login", "--url", cli.url, "--token", alice)[2] == ""  # the same login again
    code, _, err = cli("login", "--url", cli.url, "--token", bob)
    assert (code, err) == (0, f"warning: this replaces the profile 'default' (alice at "
                              f"{cli.url}); `osmo --profile NAME login ...` keeps each login "
                              "under its own name\n")
    assert cli("--profile", "alice", "login", "--url", cli.url, "--token", alice)[2] == ""
    stored = json.loads(Path(os.environ["OSMO_CONFIG"]).read_text())
    assert stored == {"current": "alice", "profiles": {
        "default": {"url": cli.url, "token": bob, "user": "bob"},
        "alice": {"url": cli.url, "token": alice, "user": "alice"}}}


def test_login_reads_the_token_from_stdin(cli, monkeypatch):
    import io

    token = cli.as_user(monkeypatch, "bob", "osmo-team-user")
    monkeypatch.delenv("OSMO_TOKEN")
    monkeypatch.setattr("sys.stdin", io.StringIO(token + "\n"))
    code, out, _ = cli("--profile", "ci", "login", "--url", cli.url, "--token", "-", "-t", "json")
    assert code == 0 and json.loads(out)["user"] == "bob"
    stored = json.loads(Path(os.environ["OSMO_CONFIG"]).read_text())
    assert stored["current"] == "ci" and stored["profiles"]["ci"]["token"] == token
    monkeypatch.delenv("OSMO_URL")
    assert cli("--profile", "ci", "pool", "list")[0] == 0
    assert cli("--profile", "missing", "pool", "list")[0] == 2


def test_login_refused(cli, monkeypatch):
    path = Path(os.environ["OSMO_CONFIG"])
    code, out, err = cli("login", "--url", cli.url, "--token", "osmo_wrong")
    assert (code, out) == (1, "")
    assert err.startswith("error: ") and err.endswith(
        "(not_authenticated); log in again with `osmo login`\n")
    assert err.count("\n") == 1
    assert cli("login", "--url", "ftp://x", "--token", "t")[0] == 2
    code, _, err = cli("login", "--url", f"http://127.0.0.1:{free_port()}", "--token", "t")
    assert code == 3 and err.startswith("error: cannot reach http://127.0.0.1:")
    assert not path.exists()


def test_environment_overrides_the_profile(cli, monkeypatch, seed_team):
    cli.as_user(monkeypatch, "viewer", "osmo-team-user")
    Path(os.environ["OSMO_CONFIG"]).parent.mkdir(parents=True)
    Path(os.environ["OSMO_CONFIG"]).write_text(json.dumps({
        "current": "default",
        "profiles": {"default": {"url": "http://127.0.0.1:9", "token": "stale"}}}))
    code, out, _ = cli("pool", "list")
    assert (code, out) == (0, SEED_002_TABLE)


# --- pool list ---------------------------------------------------------------------------------

def test_pool_list_is_the_seed_table(cli, monkeypatch, seed_team):
    cli.as_user(monkeypatch, "viewer", "osmo-team-user")
    code, out, err = cli("pool", "list")
    assert (code, err) == (0, "")
    assert out == SEED_002_TABLE


def test_pool_list_json_is_the_api_body(cli, monkeypatch, seed_team):
    cli.as_user(monkeypatch, "viewer", "osmo-team-user")
    for argv in (("pool", "list", "-t", "json"), ("--format", "json", "pool", "list")):
        code, out, _ = cli(*argv)
        report = json.loads(out)
        assert code == 0
        assert report["pools"][0]["available_gpus"] == -40
        assert report["resource_sum"]["total_quota_gpus"] == 100


def test_pool_list_widths_follow_content(cli, monkeypatch):
    cli.as_user(monkeypatch, "viewer", "osmo-admin")
    research = factories.pool("research-large", 1000, status="MAINTENANCE")
    factories.subpool(research, "vision-team", 600)
    factories.pool("tiny", 0)
    code, out, _ = cli("pool", "list")
    assert code == 0
    assert out == (
        "Pool                            Status         Subpool State  GPU Quota          "
        "Used  Available\n"
        "------------------------------  -------------  -------------  -----------------  "
        "----  ---------\n"
        "research-large                  MAINTENANCE    -              400 (Total: 1000)  "
        "0     400\n"
        "└─ research-large--vision-team  MAINTENANCE    ACTIVE         600                "
        "0     600\n"
        "tiny                            ONLINE         -              0 (Total: 0)       "
        "0     0\n")


def test_pool_list_with_nothing_visible_says_so(cli, monkeypatch, seed_team):
    cli.as_user(monkeypatch, "nobody")
    assert cli("pool", "list") == (
        0, "No pool is visible to you: you have no role in any pool.\n", "")


def test_pool_list_of_a_pool_not_visible_is_an_error(cli, monkeypatch, seed_team):
    factories.pool("inference", 32)
    cli.as_user(monkeypatch, "viewer", "osmo-team-user")
    hidden = ("error: no pool or subpool named '{}' is visible to you: it does not exist, or you "
              "have no role in it (pool_not_found)\n")
    assert cli("pool", "list", "-p", "inference") == (1, "", hidden.format("inference"))
    assert cli("pool", "list", "-p", "nosuch", "-t", "json")[::2] == (1, hidden.format("nosuch"))
    # The pools that are visible are listed; the one that is not is still an error.
    code, out, err = cli("pool", "list", "-p", "team--c", "-p", "inference", "-p", "team--c")
    assert (code, err) == (1, hidden.format("inference"))
    assert out.splitlines()[2:] == [
        "team            ONLINE         -              10 (Total: 100)  50    -40        8    58",
        "└─ team--c      ONLINE         ACTIVE         20               0     20         0    0"]


# --- subpools ----------------------------------------------------------------------------------

def test_subpool_lifecycle(cli, monkeypatch, seed_team):
    cli.as_user(monkeypatch, "lead", "osmo-team-admin")
    assert cli("pool", "subpool", "update", "team", "c", "--quota", "5") == (
        0, "Updated subpool team--c: ACTIVE, quota 5 GPUs, used 0, available 5\n", "")
    assert cli("pool", "subpool", "create", "team", "d", "--quota", "15") == (
        0, "Created subpool team--d: ACTIVE, quota 15 GPUs, used 0, available 15\n", "")
    # b runs 10 GPUs (and 3 LOW): it drains.
    assert cli("pool", "subpool", "delete", "team", "b") == (
        0, "Subpool team--b: DELETING, quota 0 GPUs, used 10, available -10; draining 2 running "
           "workflow(s) holding 13 GPUs. It takes no new work and becomes ARCHIVED once its "
           "running workflows finish.\n", "")
    assert cli("pool", "subpool", "delete", "team", "d") == (
        0, "Subpool team--d: ARCHIVED, quota 0 GPUs, used 0, available 0.\n", "")
    code, out, _ = cli("pool", "list")
    assert out.splitlines()[2:] == [  # DELETING shows its drain progress; LOW columns follow
        "team            ONLINE         -                                   65 (Total: 100)  50"
        "    15         8    58",
        "├─ team--a      ONLINE         ACTIVE                              30               5 "
        "    25         0    5",
        "├─ team--b      ONLINE         DELETING (2 running, 13 GPUs held)  0                10"
        "    -10        3    13",
        "└─ team--c      ONLINE         ACTIVE                              5                0 "
        "    5          0    0",
    ]
    code, out, _ = cli("pool", "list", "--include-archived")
    assert out.splitlines()[-1].split() == ["└─", "team--d", "ONLINE", "ARCHIVED", "0", "0",
                                            "0", "0", "0"]
    # Reusing an archived name reactivates it.
    code, out, _ = cli("pool", "subpool", "create", "team", "d", "--quota", "1", "-t", "json")
    assert code == 0 and json.loads(out)["state"] == "ACTIVE"
    assert Pool.objects.get(name="team--d").subpool_state == SubpoolState.ACTIVE
    actors = set(PoolEvent.objects.filter(pool__parent_id="team", actor_name="lead")
                 .values_list("action", flat=True))
    assert actors == {"subpool_quota_changed", "subpool_created", "subpool_deleting",
                      "subpool_archived", "subpool_reactivated"}


@pytest.mark.parametrize(("argv", "error"), [
    (("create", "team", "d", "--quota", "11"),
     "error: Pool 'team' has 100 GPUs, 90 of them already in ACTIVE subpools: 10 unallocated, "
     "11 requested. (quota_exceeds_parent)\n"),
    (("create", "team", "a", "--quota", "1"),
     "error: Subpool 'team--a' already exists (ACTIVE). (subpool_exists)\n"),
    (("create", "team", "x--y", "--quota", "1"),
     "error: 'x--y' is not a valid subpool name: use 1-40 lowercase letters, digits and '-', "
     "starting and ending with a letter or digit, and never '--'. (invalid_name)\n"),
    (("create", "nope", "d", "--quota", "1"),
     "error: Pool 'nope' does not exist. (pool_not_found)\n"),
    (("update", "team", "zz", "--quota", "1"),
     "error: Pool 'team' has no subpool 'zz'. (subpool_not_found)\n"),
    (("create", "team--a", "d", "--quota", "1"),
     "error: 'team--a' is a subpool; subpools cannot have subpools. (parent_is_subpool)\n"),
])
def test_subpool_refusals(cli, monkeypatch, seed_team, argv, error):
    cli.as_user(monkeypatch, "lead", "osmo-team-admin")
    before = pools_state()
    assert cli("pool", "subpool", *argv) == (1, "", error)
    assert pools_state() == before


def test_subpool_refused_to_users_and_bad_usage(cli, monkeypatch, seed_team):
    cli.as_user(monkeypatch, "someone", "osmo-team-user")
    before = pools_state()
    code, out, err = cli("pool", "subpool", "delete", "team", "a")
    assert (code, out) == (1, "")
    assert err == ("error: Only admins of pool 'team' (osmo-team-admin) can manage its "
                   "subpools. (forbidden)\n")
    for argv in (("create", "team", "d"), ("create", "team", "d", "--quota", "-1"),
                 ("update", "team", "a", "--quota", "many"), ("rename", "team", "a")):
        assert cli("pool", "subpool", *argv)[0] == 2
    assert pools_state() == before


# --- failures of the server --------------------------------------------------------------------

def test_server_errors_exit_3(cli, monkeypatch):
    """A real HTTP server answering 500 (and one answering HTML) stands in for a broken OSMO."""
    import http.server
    import threading

    class Broken(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the stdlib's name
            body, kind = ((b'{"code": "server_error", "detail": "Internal server error."}',
                           "application/json") if self.path.startswith("/api/")
                          else (b"<html>hello</html>", "text/html"))
            self.send_response(500 if self.path.startswith("/api/") else 200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Broken)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        monkeypatch.setenv("OSMO_URL", base)
        monkeypatch.setenv("OSMO_TOKEN", "t")
        assert cli("pool", "list") == (
            3, "", "error: server error: Internal server error. (server_error)\n")
        monkeypatch.setenv("OSMO_URL", base + "/web")
        code, _, err = cli("pool", "list")
        assert code == 3 and "without JSON: is it an OSMO server?" in err
    finally:
        server.shutdown()


def test_installed_script(cli, monkeypatch, seed_team):
    """The console script itself: output and exit codes as a shell script sees them."""
    cli.as_user(monkeypatch, "viewer", "osmo-team-user")
    osmo = Path(sys.executable).with_name("osmo")
    done = subprocess.run([str(osmo), "pool", "list"], capture_output=True, text=True,
                          env=os.environ, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, SEED_002_TABLE, "")
    done = subprocess.run([str(osmo), "pool", "subpool", "delete", "team", "a"],
                          capture_output=True, text=True, env=os.environ, timeout=60)
    assert done.returncode == 1 and done.stderr.endswith("(forbidden)\n")
    done = subprocess.run([str(osmo), "pool", "frobnicate"], capture_output=True, text=True,
                          env=os.environ, timeout=60)
    assert done.returncode == 2


def test_standalone_is_unchanged(capsys):
    from osmo.cli.main import main

    assert main(["standalone", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--demo" in out and "--data-dir" in out and "--port" in out


def test_pool_list_without_low_work_is_the_seed_table_exactly(cli, monkeypatch):
    team = factories.pool("team", 100)
    subpools = {name: factories.subpool(team, name, gpus)
                for name, gpus in (("a", 30), ("b", 40), ("c", 20))}
    factories.running_workflow(team, 50, "NORMAL")
    factories.running_workflow(subpools["a"], 5, "HIGH")
    factories.running_workflow(subpools["b"], 10, "NORMAL")
    cli.as_user(monkeypatch, "viewer", "osmo-team-user")
    assert cli("pool", "list") == (0, """\
Pool            Status         Subpool State  GPU Quota        Used  Available
--------------  -------------  -------------  ---------------  ----  ---------
team            ONLINE         -              10 (Total: 100)  50    -40
├─ team--a      ONLINE         ACTIVE         30               5     25
├─ team--b      ONLINE         ACTIVE         40               10    30
└─ team--c      ONLINE         ACTIVE         20               0     20
""", "")


def test_pool_list_filters_free_mode_and_drain_progress(cli, monkeypatch, seed_team):
    cli.as_user(monkeypatch, "viewer", "osmo-team-user")
    code, out, _ = cli("pool", "list", "-p", "team--b", "--mode", "free", "--format-type",
                       "text")
    assert (code, out) == (0, """\
Pool            Status         Subpool State  GPU Quota        Free
--------------  -------------  -------------  ---------------  ----
team            ONLINE         -              10 (Total: 100)  -40
└─ team--b      ONLINE         ACTIVE         40               30
""")
    cli.as_user(monkeypatch, "boss", "osmo-team-admin")
    assert cli("pool", "subpool", "delete", "team", "b")[0] == 0
    code, out, _ = cli("pool", "list", "--pool", "team--b")
    assert (code, out.splitlines()[-1].split()) == (0, [
        "└─", "team--b", "ONLINE", "DELETING", "(2", "running,", "13", "GPUs", "held)", "0",
        "10", "-10", "3", "13"])


def test_pool_create_and_update_for_platform_admins(cli, monkeypatch, db):
    cli.as_user(monkeypatch, "root", "osmo-admin")
    assert cli("pool", "create", "research", "--quota", "16", "--weight", "2") == (
        0, "Created pool research: quota 16 GPUs, limit -1, weight 2\n", "")
    assert cli("pool", "update", "research", "--limit", "32") == (
        0, "Updated pool research: quota 16 GPUs, limit 32, weight 2\n", "")
    cli.as_user(monkeypatch, "alice", "osmo-research-user")
    before = pools_state()
    code, _, err = cli("pool", "update", "research", "--quota", "99")
    assert code == 1 and err.endswith("(forbidden)\n")
    assert pools_state() == before
