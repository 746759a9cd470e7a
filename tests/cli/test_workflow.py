"""`osmo workflow submit|list|query|cancel` against a live server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from osmo.cli.workflow import describe, expected_start
from tests import factories
from workflows.models import Workflow, WorkflowStatus

pytestmark = pytest.mark.django_db(transaction=True)

SPEC = """\
workflow:
  name: {{name}}
  tasks:
  - name: main
    image: ubuntu
    command: [bash, /tmp/run.sh]
    resource: gpu
    files:
    - path: /tmp/run.sh
      localpath: scripts/run.sh
  resources:
    gpu:
      gpu: {{gpus}}
      cpu: 1
      memory: 1Gi
default-values:
  name: cli-job
  gpus: 2
"""


@pytest.fixture
def spec_file(tmp_path) -> Path:
    folder = tmp_path / "project"
    (folder / "scripts").mkdir(parents=True)
    (folder / "scripts" / "run.sh").write_text("#!/bin/bash\necho training\n")
    path = folder / "job.yaml"
    path.write_text(SPEC)
    return path


@pytest.fixture
def user(cli, monkeypatch, seed_team):
    cli.as_user(monkeypatch, "ml-user", "osmo-team-user")
    return cli


def test_submit_inlines_local_files(user, spec_file, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # localpath is relative to the spec, not to the shell
    code, out, err = user("workflow", "submit", "--pool", "team--c", "--priority", "HIGH",
                          "--set", "gpus=4", "--set-string", "name=run", str(spec_file))
    assert (code, err) == (0, "")
    workflow = Workflow.objects.get(user__username="ml-user")
    assert out == (f"Submitted {workflow.name} in pool team--c at HIGH priority, 4 GPUs: "
                   f"PENDING\n")
    assert workflow.name.startswith("run-")
    assert (workflow.pool.name, workflow.priority, workflow.gpus_requested) == (
        "team--c", "HIGH", 4)
    assert "      localpath: scripts/run.sh\n      contents: |\n        #!/bin/bash\n" \
           "        echo training\n" in workflow.spec
    assert (workflow.set_variables, workflow.set_string_variables) == (["gpus=4"], ["name=run"])


def test_submit_dry_run_writes_nothing(user, spec_file):
    code, out, _ = user("workflow", "submit", "--pool", "team--a", "--dry-run", str(spec_file))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("Dry run: cli-job-") and lines[0].endswith(
        " in pool team--a at NORMAL priority, 2 GPUs, would be admitted.")
    assert any(line.startswith("  PodGroup ") for line in lines[2:])
    code, out, _ = user("workflow", "submit", "--pool", "team--a", "--dry-run", "-t", "json",
                        str(spec_file))
    body = json.loads(out)
    # the contract's dry-run body (plus the OSMO client's name, spec and warnings)
    assert {"workflow", "manifests"} <= set(body) and body["workflow"]["status"] == "PENDING"
    assert Workflow.objects.filter(pool__name="team--a").count() == 1  # the seed's only


def test_submit_refusals(user, spec_file, tmp_path):
    before = Workflow.objects.count()
    # The parent has 10 unallocated GPUs; 12 at NORMAL cannot be admitted there.
    code, out, err = user("workflow", "submit", "--pool", "team", "--set", "gpus=12",
                          str(spec_file))
    assert (code, out) == (1, "")
    assert err.startswith("error: ") and err.endswith("(exceeds_unallocated)\n")
    assert "10" in err and "12" in err and err.count("\n") == 1
    assert user("workflow", "submit", "--pool", "nope", str(spec_file))[0] == 1
    code, _, err = user("workflow", "submit", "--pool", "team", str(tmp_path / "missing.yaml"))
    assert code == 2 and err.startswith(f"error: cannot read {tmp_path / 'missing.yaml'}: ")
    (spec_file.parent / "scripts" / "run.sh").unlink()
    code, _, err = user("workflow", "submit", "--pool", "team", str(spec_file))
    assert code == 2 and "(a localpath in" in err
    assert user("workflow", "submit", "--pool", "team", "--set", "novalue",
                str(spec_file))[0] == 2
    assert user("workflow", "submit", "--pool", "team", "--priority", "URGENT",
                str(spec_file))[0] == 2
    bad = spec_file.parent / "bad.yaml"
    bad.write_text("workflow:\n  name: x\n  tasks: []\n")
    code, _, err = user("workflow", "submit", "--pool", "team", str(bad))
    assert code == 1 and err.endswith("(invalid_spec)\n")
    assert Workflow.objects.count() == before


def test_list_query_cancel(user, spec_file, monkeypatch):
    user("workflow", "submit", "--pool", "team--a", str(spec_file))
    mine = Workflow.objects.get(user__username="ml-user")
    code, out, _ = user("workflow", "list", "--user", "ml-user")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["Name", "Pool", "Priority", "Status", "Reason", "GPUs", "User",
                                "Submitted"]
    assert set(lines[1]) == {"-", " "} and len(lines) == 3
    # No cycle has run yet: the scheduler gives no reason, and the column says so.
    assert lines[2].split()[:7] == [mine.name, "team--a", "NORMAL", "PENDING", "-", "2",
                                    "ml-user"]
    code, out, _ = user("workflow", "list", "--pool", "team--b", "--status", "RUNNING",
                        "-t", "json")
    page = json.loads(out)
    assert page["count"] == 2 and {w["pool"] for w in page["results"]} == {"team--b"}
    code, out, _ = user("workflow", "list", "--limit", "2")
    assert out.splitlines()[-1] == "(2 of 6; use --limit to see more)"

    code, out, _ = user("workflow", "query", mine.name)
    assert code == 0
    assert out.splitlines()[:4] == [f"Name:      {mine.name}", "Kind:      workflow",
                                    "Pool:      team--a", "Priority:  NORMAL"]
    assert "Group" in out and "main" in out
    code, out, _ = user("workflow", "query", mine.name, "-t", "json")
    assert json.loads(out)["name"] == mine.name

    assert user("workflow", "cancel", mine.name) == (
        0, f"Workflow {mine.name}: FAILED_CANCELED\n", "")
    mine.refresh_from_db()
    assert mine.status == WorkflowStatus.FAILED_CANCELED


def test_an_empty_list_says_nothing_visible_matched(user, cli, monkeypatch, seed_team):
    factories.running_workflow(factories.pool("inference", 32), 1)
    assert user("workflow", "list", "--pool", "inference") == (
        0, "No workflow visible to you matches these filters.\n", "")
    code, out, _ = user("workflow", "list", "--pool", "inference", "-t", "json")
    assert (code, json.loads(out)["count"]) == (0, 0)
    cli.as_user(monkeypatch, "newcomer")
    assert cli("workflow", "list") == (0, "No workflow is visible to you yet.\n", "")


def test_query_and_cancel_refusals(user, monkeypatch, seed_team):
    other = factories.running_workflow(seed_team, 1)  # no submitter: not ml-user's
    assert user("workflow", "query", "nope") == (
        1, "", "error: Workflow 'nope' does not exist. (workflow_not_found)\n")
    code, _, err = user("workflow", "cancel", other.name)
    assert code == 1 and err.endswith("(forbidden)\n")
    other.refresh_from_db()
    assert other.status == WorkflowStatus.RUNNING
    assert user("workflow", "list", "--status", "SLEEPING")[0] == 2


def test_query_shows_why_it_waits_and_explain_says_it_all(user, spec_file):
    user("workflow", "submit", "--pool", "team--a", str(spec_file))
    mine = Workflow.objects.get(user__username="ml-user")
    group = mine.groups.get()
    code, out, _ = user("workflow", "query", mine.name)
    assert code == 0
    assert (f"Reason:    {group.name}: Admitted; waiting for the next scheduling cycle."
            in out.splitlines())
    code, out, _ = user("workflow", "explain", mine.name)
    assert (code, out) == (0, f"{group.name} ({group.podgroup}): SCHEDULING\n"
                              "  - Admitted; waiting for the next scheduling cycle. "
                              "[not_yet_scheduled]\n")
    code, out, _ = user("workflow", "explain", mine.name, "--format-type", "json")
    assert json.loads(out)["groups"][0]["reasons"][0]["code"] == "not_yet_scheduled"


def test_query_and_explain_say_when_a_reserved_group_is_expected_to_start():
    workflow = {"name": "big-1", "kind": "workflow", "pool": "team", "priority": "NORMAL",
                "user": "ml-user", "status": "PENDING", "reason": None, "gpus_requested": 64,
                "submitted_at": "2026-11-26T10:00:00Z", "started_at": None,
                "finished_at": None, "groups": []}
    estimate = {"expected_start_at": "2026-11-26T10:07:00Z", "reserved_gpus": 64,
                "reserved_nodes": [f"n{i:02d}" for i in range(1, 9)],
                "waits_for": ["workflow 'x-1'"], "untimed": []}
    explanation = {"workflow": "big-1", "groups": [{
        "name": "train", "podgroup": "big-1-train", "status": "SCHEDULING", "estimate": estimate,
        "reasons": [{"code": "reserved_start", "message": "reserved nodes n01–n08 (8 nodes); "
                     "expected start in 7 min, when workflow 'x-1' reaches its exec_timeout"}]}]}
    lines = describe(workflow, explanation).splitlines()
    assert ("Expected start: train: 2026-11-26T10:07:00Z on reserved n01, n02, n03, n04, ..."
            in lines)
    assert ("Reason:         train: reserved nodes n01–n08 (8 nodes); expected start in 7 min, "
            "when workflow 'x-1' reaches its exec_timeout") in lines
    estimate["expected_start_at"] = None
    assert expected_start(explanation) == ("train: no estimate (work without an exec_timeout "
                                           "in the way) on reserved n01, n02, n03, n04, ...")
    assert expected_start({"groups": [{"name": "g", "estimate": None}]}) is None
