"""Admission refuses what the Kubernetes API server would refuse at dispatch: 400
`invalid_spec` with the path, and nothing stored. (tests/kube_real/test_admission_rules.py
shows the real API server refusing the same values and accepting what passes here.)"""

from __future__ import annotations

import pytest

from tests import factories
from workflows.models import Task, Workflow

pytestmark = pytest.mark.django_db

TASK = "workflow.groups[0].tasks[0]"


@pytest.fixture
def alice(client_for):
    factories.pool("team", 64)
    return client_for("alice", "osmo-team-user")


def workflow_spec(task: str) -> str:
    return f"""
workflow:
  name: rules
  groups:
  - name: g
    tasks:
    - name: t
      image: nvcr.io/x:1
      command: [run]
{task}
"""


BIG = "x" * (1024 * 1024 + 1)
WORKFLOW_CASES = {
    "env name with a space and a leading digit": (
        '      environment: {"1-BAD NAME": x}', f"{TASK}.environment.1-BAD NAME"),
    "env name starting with ..": ('      environment: {"..x": y}', f"{TASK}.environment...x"),
    "image with surrounding whitespace": ('      image: " nvcr.io/x:1"', f"{TASK}.image"),
    "a file mounted twice": (
        "      files:\n      - {path: /opt/a, contents: a}\n      - {path: opt/a, contents: b}",
        f"{TASK}.files[1].path"),
    "files over a Secret's 1 MiB": (
        f"      files:\n      - {{path: /opt/a, contents: {BIG}}}", f"{TASK}.files"),
}


def check_refused(response, path: str) -> None:
    assert response.status_code == 400, response.json()
    body = response.json()
    assert body["code"] == "invalid_spec"
    assert path in body["errors"], body["errors"]
    assert Workflow.objects.count() == 0 and Task.objects.count() == 0


@pytest.mark.parametrize("case", list(WORKFLOW_CASES))
def test_a_workflow_the_api_server_would_refuse_is_refused_at_admission(alice, case) -> None:
    task, path = WORKFLOW_CASES[case]
    text = workflow_spec(task)
    if "image:" in task:
        text = text.replace("      image: nvcr.io/x:1\n", "")
    response = alice.post("/api/pool/team/workflow", {"file": text}, format="json")
    check_refused(response, path)


def test_names_the_api_server_takes_pass(alice) -> None:
    text = workflow_spec('      environment: {_A.b-1: x, -dash: y, a..b: z, MY_VAR: "1"}\n'
                         "      files:\n      - {path: /opt/a, contents: a}\n"
                         "      - {path: opt/b, contents: b}")
    response = alice.post("/api/pool/team/workflow", {"file": text}, format="json")
    assert response.status_code == 201, response.json()


CONTAINER = "spec.template.spec.containers[0]"


def job(container: dict | None = None, labels: dict | None = None) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "etl"},
            "spec": {"template": {"metadata": {"labels": labels or {}}, "spec": {
                "containers": [{"name": "main", "image": "x", **(container or {})}]}}}}


WORKLOAD_CASES = {
    "env name": (job({"env": [{"name": "1-BAD NAME", "value": "x"}]}),
                 f"{CONTAINER}.env[0].name"),
    "port out of range": (job({"ports": [{"containerPort": 70000}]}),
                          f"{CONTAINER}.ports[0].containerPort"),
    "label key": (job(labels={"bad key": "v"}), "spec.template.metadata.labels.bad key"),
    "label value": (job(labels={"team": "not ok!"}), "spec.template.metadata.labels.team"),
    "quantity": (job({"resources": {"limits": {"memory": "lots"}}}),
                 f"{CONTAINER}.resources.limits.memory"),
    "container name": (job({"name": "Main_C"}), f"{CONTAINER}.name"),
}


@pytest.mark.parametrize("case", list(WORKLOAD_CASES))
def test_a_workload_the_api_server_would_refuse_is_refused_at_admission(alice, case) -> None:
    manifest, path = WORKLOAD_CASES[case]
    response = alice.post("/api/pool/team/workload", manifest, format="json")
    check_refused(response, path)


def test_a_list_reports_the_item_path(alice) -> None:
    manifest = {"apiVersion": "v1", "kind": "List", "items": [
        job(), job({"env": [{"name": "", "value": "x"}]})]}
    manifest["items"][1]["metadata"]["name"] = "Bad_Name"
    response = alice.post("/api/pool/team/workload", manifest, format="json")
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"items[1].metadata.name",
                                              f"items[1].{CONTAINER}.env[0].name"}
