"""`osmo workflow submit|list|query|cancel` as client 6.4.0 sends them and reads the answers (a
replay: requests written by hand from the client's 6.4.0 source, not a recorded transcript —
``replay.py``)."""

from __future__ import annotations

import datetime

import pytest
import yaml

from tests import factories
from workflows.models import Workflow

from .replay import user_zone_time

pytestmark = pytest.mark.django_db

SPEC = """workflow:
  name: train
  resources:
    default:
      cpu: 1
      gpu: 2
      memory: 1Gi
  tasks:
  - name: trainer
    image: ubuntu:24.04
    command: ["sleep", "600"]
"""

TEMPLATED = """workflow:
  name: {{workflow_name}}
  tasks:
  - name: hello
    image: ubuntu:{{ubuntu_version}}
    command: ["echo"]
    args: ["{{message}}"]

default-values:
  workflow_name: hello-osmo
  ubuntu_version: 22.04
  message: Hello from OSMO!
"""

TEMPLATE_MARKERS = ("{%", "{{", "{#", "default-values")


@pytest.fixture
def team():
    team = factories.pool("team", 20)
    factories.subpool(team, "a", 8)
    return team


def submit(osmo, spec: str, *, pool: str | None = None, priority: str | None = None,
           labels: list[str] = (), set_variables: list[str] = (), dry: bool = False):
    """`_submit_workflow` + `submit_workflow_helper` for a workflow file."""
    if not pool:  # `pool.fetch_default_pool`
        pool = osmo.request("GET", "api/profile/settings").get("profile", {}).get("pool", None)
        assert pool, "No default pool set"
    params = {}
    if priority:
        params["priority"] = priority
    if labels:
        params["label"] = list(labels)
    template = {"file": spec, "set_variables": list(set_variables), "set_string_variables": [],
                "uploaded_templated_spec": None}
    templated = any(marker in spec for marker in TEMPLATE_MARKERS)
    result = None
    if templated or dry:
        params["dry_run"] = True
        result = osmo.request("POST", f"api/pool/{pool}/workflow", payload=template,
                              params=params)
        if dry:
            return result  # prints result['spec']
        params["dry_run"] = False
    if templated:
        template["uploaded_templated_spec"] = template["file"]
        updated = yaml.safe_load(result["spec"])
    else:
        updated = yaml.safe_load(template["file"])
    template["file"] = yaml.dump(updated)
    return osmo.request("POST", f"api/pool/{pool}/workflow", payload=template, params=params)


def printed_submission(result) -> list[str]:
    """`print_submission_results`: the keys it indexes."""
    lines = ["Workflow submit successful.", f"Workflow ID        - {result['name']}",
             f"Workflow Overview  - {result['overview']}"]
    return lines + [f"WARNING: {w}" for w in result.get("warnings", [])]


def test_submit_plain(osmo_as, team):
    osmo = osmo_as("alice", "osmo-team-user")
    result = submit(osmo, SPEC, pool="team--a")
    assert printed_submission(result) == [
        "Workflow submit successful.", "Workflow ID        - train-1",
        "Workflow Overview  - http://testserver/workflows/train-1/"]
    workflow = Workflow.objects.get(name="train-1")
    assert (workflow.pool.name, workflow.priority, workflow.gpus_requested,
            workflow.user.username) == ("team--a", "NORMAL", 2, "alice")
    assert result["status"] == "PENDING" and result["warnings"] == []


def test_submit_with_priority_and_labels(osmo_as, team):
    osmo = osmo_as("alice", "osmo-team-user")
    result = submit(osmo, SPEC, pool="team", priority="HIGH",
                    labels=["project=vision", "stage=dev"])
    workflow = Workflow.objects.get(name=result["name"])
    assert workflow.priority == "HIGH"
    assert workflow.labels == {"project": "vision", "stage": "dev"}
    assert result["labels"] == {"project": "vision", "stage": "dev"}


def test_submit_labels_override_the_spec_labels(osmo_as, team):
    osmo = osmo_as("alice", "osmo-team-user")
    spec = SPEC.replace("  name: train\n", "  name: train\n  labels:\n    stage: prod\n"
                        "    owner: ml\n")
    result = submit(osmo, spec, pool="team", labels=["stage=dev"])
    assert Workflow.objects.get(name=result["name"]).labels == {"stage": "dev", "owner": "ml"}


@pytest.mark.parametrize("label", ["novalue", "bad key=x", "k=bad value", "k="])
def test_submit_refuses_malformed_labels(osmo_as, team, label):
    osmo = osmo_as("alice", "osmo-team-user")
    response = osmo.raw("POST", "api/pool/team/workflow", params={"label": [label]},
                        payload={"file": SPEC, "set_variables": [],
                                 "set_string_variables": [], "uploaded_templated_spec": None})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert list(response.json()["errors"]) == ["label.0"]
    assert Workflow.objects.count() == 0


def test_submit_dry_run_returns_the_spec_and_writes_nothing(osmo_as, team):
    osmo = osmo_as("alice", "osmo-team-user")
    result = submit(osmo, SPEC, pool="team--a", dry=True)
    assert result["name"] == "train-1"
    assert yaml.safe_load(result["spec"]) == yaml.safe_load(SPEC)
    assert {"workflow", "manifests"} <= set(result)  # the contract's dry-run body
    assert Workflow.objects.count() == 0


def test_submit_templated_spec_with_set(osmo_as, team):
    osmo = osmo_as("alice", "osmo-team-user")
    dry = submit(osmo, TEMPLATED, pool="team", set_variables=["workflow_name=templated",
                                                               "message=hi"], dry=True)
    rendered = yaml.safe_load(dry["spec"])  # the client re-parses the rendered spec
    assert rendered["workflow"]["name"] == "templated"
    assert rendered["workflow"]["tasks"][0]["args"] == ["hi"]
    assert rendered["workflow"]["tasks"][0]["image"] == "ubuntu:22.04"
    result = submit(osmo, TEMPLATED, pool="team", set_variables=["workflow_name=templated",
                                                                  "message=hi"])
    assert result["name"] == "templated-1"
    workflow = Workflow.objects.get(name="templated-1")
    assert yaml.safe_load(workflow.rendered_spec)["workflow"]["tasks"][0]["args"] == ["hi"]


def test_submit_without_a_default_pool_picks_the_only_pool(osmo_as, team):
    """`fetch_default_pool`: no profile pool, then `GET //api/pool` and its node sets."""
    osmo = osmo_as("solo", "osmo-solo-user")
    factories.pool("solo", 4)
    assert osmo.request("GET", "api/profile/settings")["profile"]["pool"] is None
    response = osmo.request("GET", "/api/pool", params={})
    names = {pool["name"] for nodeset in response.get("node_sets", [])
             for pool in nodeset.get("pools", [])}
    assert names == {"solo"}


def test_submit_to_the_profile_default_pool(osmo_as, team):
    osmo = osmo_as("alice", "osmo-team-user")
    osmo.request("POST", "api/profile/settings", payload={"pool": "team--a"}, params={})
    result = submit(osmo, SPEC)
    assert Workflow.objects.get(name=result["name"]).pool.name == "team--a"


def list_workflows(osmo, *, users=(), statuses=(), pools=(), name=None, all_users=False,
                   priority=(), labels=(), count=20, offset=0):
    """`_list_workflows` with the client's default `--order asc`."""
    params: dict = {}
    if users:
        params["users"] = list(users)
    if statuses:
        params["statuses"] = list(statuses)
    if name:
        params["name"] = name
    params["order"] = "DESC"
    if all_users:
        params["all_users"] = True
    if pools:
        params["pools"] = list(pools)
    else:
        params["all_pools"] = True
    if priority:
        params["priority"] = list(priority)
    if labels:
        params["label"] = list(labels)
    current, rows = 0, []
    while True:
        batch = min(count - current, 1000)
        params["limit"] = batch
        params["offset"] = offset + current
        result = osmo.request("GET", "api/workflow", params=params)
        rows.extend(result["workflows"])
        current += batch
        if count <= current or not result["more_entries"]:
            break
    rows.reverse()
    return rows


def table_row(workflow: dict) -> list[str]:
    """`_workflow_table_generator`: the keys it reads and the time it parses."""
    labels = ", ".join(f"{k}={v}" for k, v in sorted((workflow.get("labels") or {}).items()))
    return [workflow.get("user", "-"), workflow.get("name", "-"),
            user_zone_time(workflow.get("submit_time", "-")), workflow.get("status", "-"),
            workflow.get("priority", "-"), labels or "-", workflow.get("overview") or "-"]


@pytest.fixture
def listed(osmo_as, team):
    alice = osmo_as("alice", "osmo-team-user")
    bob = osmo_as("bob", "osmo-team-user")
    names = {
        "a1": submit(alice, SPEC, pool="team", labels=["project=sim_1"])["name"],
        "a2": submit(alice, SPEC, pool="team--a", priority="HIGH",
                     labels=["project=hil_2"])["name"],
        "b1": submit(bob, SPEC.replace("name: train", "name: eval"), pool="team",
                     priority="LOW")["name"],
    }
    return alice, bob, names


def test_list_rows_as_the_client_prints_them(listed):
    alice, _, names = listed
    rows = list_workflows(alice)
    assert [row["name"] for row in rows] == [names["a1"], names["a2"], names["b1"]]  # asc
    row = table_row(rows[1])
    assert row[:2] == ["alice", names["a2"]]
    assert row[3:] == ["PENDING", "HIGH", "project=hil_2",
                       f"http://testserver/workflows/{names['a2']}/"]
    assert rows[1]["pool"] == "team--a"
    # naive UTC with microseconds, as the client's strptime formats accept
    assert "+" not in rows[0]["submit_time"] and "Z" not in rows[0]["submit_time"]


def test_list_filters(listed):
    alice, _, names = listed
    assert [r["name"] for r in list_workflows(alice, pools=["team--a"])] == [names["a2"]]
    assert [r["name"] for r in list_workflows(alice, pools=["team", "team--a"])] == [
        names["a1"], names["a2"], names["b1"]]
    assert list_workflows(alice, statuses=["RUNNING"]) == []
    assert len(list_workflows(alice, statuses=["PENDING", "WAITING"])) == 3
    assert [r["name"] for r in list_workflows(alice, users=["bob"])] == [names["b1"]]
    assert [r["name"] for r in list_workflows(alice, all_users=True)] == [
        names["a1"], names["a2"], names["b1"]]
    assert [r["name"] for r in list_workflows(alice, name="eva")] == [names["b1"]]
    assert [r["name"] for r in list_workflows(alice, priority=["HIGH", "LOW"])] == [
        names["a2"], names["b1"]]
    assert [r["name"] for r in list_workflows(alice, labels=["project=sim_1"])] == [
        names["a1"]]
    assert [r["name"] for r in list_workflows(alice, labels=["project=(sim_*|hil_*)"])] == [
        names["a1"], names["a2"]]
    assert [r["name"] for r in list_workflows(alice, labels=["project=hil*"])] == [
        names["a2"]]


def test_list_by_submission_date(listed):
    alice, _, names = listed
    today = datetime.datetime.now(datetime.UTC).date()
    tomorrow = today + datetime.timedelta(days=1)
    # `common.convert_timezone(f'{date}T00:00:00')`: naive UTC, '%Y-%m-%dT%H:%M:%S'
    params = {"all_pools": True, "order": "DESC", "limit": 20, "offset": 0,
              "submitted_after": f"{today}T00:00:00", "submitted_before": f"{tomorrow}T00:00:00"}
    assert len(alice.request("GET", "api/workflow", params=params)["workflows"]) == 3
    params["submitted_after"] = f"{tomorrow}T00:00:00"
    params.pop("submitted_before")
    assert alice.request("GET", "api/workflow", params=params)["workflows"] == []


def test_list_paginates_with_more_entries(listed):
    alice, _, names = listed
    rows = list_workflows(alice, count=2)
    assert [r["name"] for r in rows] == [names["a2"], names["b1"]]  # the newest two, asc
    page = alice.request("GET", "api/workflow", params={"limit": 2, "offset": 2,
                                                         "all_pools": True, "order": "DESC"})
    assert [r["name"] for r in page["workflows"]] == [names["a1"]]
    assert page["more_entries"] is False


def test_list_refuses_unknown_statuses(listed):
    alice, _, _ = listed
    response = alice.raw("GET", "api/workflow", params={"statuses": ["SLEEPING"]})
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"


def test_query_as_the_client_prints_it(listed):
    alice, _, names = listed
    result = alice.request("GET", f"api/workflow/{names['a2']}", params={"verbose": False})
    tasks = [task for group in result["groups"] for task in group["tasks"]]
    assert (result["status"], result["submitted_by"]) == ("PENDING", "alice")
    assert result["overview"] == f"http://testserver/workflows/{names['a2']}/"
    assert result["labels"] == {"project": "hil_2"}
    user_zone_time(result.get("submit_time", "-"))
    assert result["start_time"] is None and result["end_time"] is None
    assert [(t["name"], t["retry_id"], t["start_time"], t["status"]) for t in tasks] == [
        ("trainer", 0, None, "SCHEDULING")]
    assert result["pool"] == "team--a"  # what `workflow restart` reads


def test_query_times_once_running(listed):
    from workflows import lifecycle

    alice, _, names = listed
    workflow = Workflow.objects.get(name=names["a1"])
    lifecycle.task_report_status(workflow=workflow, task_name="trainer", status="RUNNING",
                                 exit_code=None, node="node-1")
    result = alice.request("GET", f"api/workflow/{names['a1']}", params={"verbose": True})
    task = result["groups"][0]["tasks"][0]
    started = Workflow.objects.get(name=names["a1"]).tasks.get().started_at
    assert task["start_time"] == started.astimezone(datetime.UTC).replace(
        tzinfo=None).isoformat()
    user_zone_time(task["start_time"])
    user_zone_time(result["start_time"])


def test_cancel(listed):
    alice, bob, names = listed
    result = alice.request("POST", f"api/workflow/{names['a1']}/cancel",
                           params={"force": False})
    assert f"Cancel job for workflow {result['name']} is submitted!" == \
        f"Cancel job for workflow {names['a1']} is submitted!"
    assert Workflow.objects.get(name=names["a1"]).status == "FAILED_CANCELED"
    # Someone else's workflow: the client prints the refusal and goes on.
    response = bob.raw("POST", f"api/workflow/{names['a2']}/cancel", params={"force": False})
    assert response.status_code == 403
    assert Workflow.objects.get(name=names["a2"]).status == "PENDING"


def test_unknown_workflow_is_a_4xx_the_client_reports(listed):
    alice, _, _ = listed
    response = alice.raw("GET", "api/workflow/nope-1", params={"verbose": False})
    assert response.status_code == 404
    assert response.json()["code"] == "workflow_not_found"


def test_overview_is_the_workflows_dashboard_page(listed, client):
    from django.contrib.auth import get_user_model

    alice, _, names = listed
    overview = alice.request("GET", f"api/workflow/{names['a2']}")["overview"]
    path = overview.removeprefix("http://testserver")
    assert client.get(path).status_code == 302  # to the login page
    client.force_login(get_user_model().objects.get(username="alice"))
    page = client.get(path)
    assert page.status_code == 200
    html = page.content.decode()
    assert f"Workflow {names['a2']}" in html and "project=hil_2" in html
    assert "trainer" in html
    outsider = get_user_model().objects.create(username="outsider")
    client.force_login(outsider)
    assert client.get(path).status_code == 404


def test_overview_uses_the_configured_dashboard_address(listed, settings):
    settings.OSMO_DASHBOARD_URL = "https://osmo.example.com"
    alice, _, names = listed
    result = alice.request("GET", f"api/workflow/{names['a1']}")
    assert result["overview"] == f"https://osmo.example.com/workflows/{names['a1']}/"


def test_validate_checks_and_writes_nothing(osmo_as, team):
    """`osmo workflow validate SPEC --pool P` (`_validate_workflow`)."""
    osmo = osmo_as("alice", "osmo-team-user")
    params = {"validation_only": True, "label": ["stage=dev"], "dry_run": False}
    payload = {"file": yaml.dump(yaml.safe_load(SPEC)), "set_variables": [],
               "set_string_variables": [], "uploaded_templated_spec": None}
    result = osmo.request("POST", "api/pool/team--a/workflow", payload=payload, params=params)
    assert result["logs"] == ("Workflow train-1 is valid and would be admitted to pool "
                              "team--a at NORMAL priority (2 GPUs).")
    assert result["warnings"] == []
    assert Workflow.objects.count() == 0
    too_big = SPEC.replace("gpu: 2", "gpu: 9")
    response = osmo.raw("POST", "api/pool/team--a/workflow", params=params,
                        payload={**payload, "file": too_big})
    assert (response.status_code, response.json()["code"]) == (409, "exceeds_quota")
