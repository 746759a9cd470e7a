"""`/api/app...` as NVIDIA's client calls it: create, update, info, spec, list, delete, rename,
and a submission of an app version — the same admission, the app recorded on the workflow."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from tests import factories
from tests.conftest import make_client
from tests.workflows.conftest import gpu_spec
from workflow_apps.models import App, AppVersion
from workflows.models import Workflow

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(db):
    return make_client("alice", "osmo-team-user")


@pytest.fixture
def bob(db):
    return make_client("bob", "osmo-team-user")


@pytest.fixture
def team(db):
    return factories.pool("team", 16)


def create(client, name, spec, description="my app"):
    return client.post(f"/api/app/user/{name}?description={description}", json.dumps(spec),
                       content_type="application/json")


def update(client, name, spec):
    return client.patch(f"/api/app/user/{name}", json.dumps(spec),
                        content_type="application/json")


def stored():
    return (sorted(App.objects.values_list("name", "owner__username", "description")),
            sorted(AppVersion.objects.values_list("app__name", "version", "status", "spec")))


def test_create_update_info_spec(alice):
    assert create(alice, "train", gpu_spec(1)).status_code == 201
    edited = update(alice, "train", gpu_spec(2))
    assert edited.status_code == 200
    assert (edited.json()["name"], edited.json()["version"]) == ("train", 2)
    info = alice.get("/api/app/user/train").json()
    assert (info["name"], info["owner"], info["description"]) == ("train", "alice", "my app")
    assert [v["version"] for v in info["versions"]] == [1, 2]
    assert info["versions"][0]["status"] == "READY"
    latest = alice.get("/api/app/user/train?limit=1").json()["versions"]
    assert [v["version"] for v in latest] == [2]
    spec = alice.get("/api/app/user/train/spec")
    assert spec["Content-Type"].startswith("text/plain")
    assert spec.content.decode() == gpu_spec(2)
    assert alice.get("/api/app/user/train/spec?version=1").content.decode() == gpu_spec(1)


def test_list_is_yours_unless_asked(alice, bob):
    create(alice, "a-app", gpu_spec(1))
    create(bob, "b-app", gpu_spec(1))
    mine = alice.get("/api/app").json()
    assert [(a["name"], a["owner"], a["latest_version"]) for a in mine["apps"]] == [
        ("a-app", "alice", "1")]
    assert mine["more_entries"] is False
    everyone = alice.get("/api/app?all_users=true").json()["apps"]
    assert sorted(a["name"] for a in everyone) == ["a-app", "b-app"]
    assert [a["name"] for a in alice.get("/api/app?users=bob").json()["apps"]] == ["b-app"]
    page = alice.get("/api/app?all_users=true&limit=1").json()
    assert (len(page["apps"]), page["more_entries"]) == (1, True)


def test_unparseable_spec_is_a_400_that_changes_nothing(alice):
    create(alice, "train", gpu_spec(1))
    before = stored()
    for bad in ("workflow: [unclosed", "workflow:\n  name: x\n  tasks: 7\n", ""):
        response = update(alice, "train", bad)
        assert response.status_code == 400, response.json()
        assert response.json()["code"] == "invalid_spec"
        assert create(alice, "other", bad).status_code == 400
    assert stored() == before


def test_unknown_version_and_app_are_404(alice):
    create(alice, "train", gpu_spec(1))
    for path in ("/api/app/user/train/spec?version=9", "/api/app/user/train?version=9",
                 "/api/app/user/nope", "/api/app/user/nope/spec"):
        response = alice.get(path)
        assert response.status_code == 404, path
        assert response.json()["code"] in ("app_not_found", "app_version_not_found")


def test_delete_a_version_then_all(alice, bob):
    create(alice, "train", gpu_spec(1))
    update(alice, "train", gpu_spec(2))
    before = stored()
    assert bob.delete("/api/app/user/train?version=1").status_code == 403
    assert alice.delete("/api/app/user/train").status_code == 400  # neither
    assert stored() == before
    assert alice.delete("/api/app/user/train?version=1").json() == {"versions": [1]}
    assert alice.get("/api/app/user/train/spec?version=1").status_code == 404
    assert alice.get("/api/app/user/train/spec").content.decode() == gpu_spec(2)
    assert alice.delete("/api/app/user/train?all_versions=true").json() == {"versions": [2]}
    assert alice.get("/api/app").json()["apps"] == []
    assert update(alice, "train", gpu_spec(3)).json()["version"] == 3  # numbers never reused


def test_rename(alice, bob):
    create(alice, "train", gpu_spec(1))
    create(alice, "taken", gpu_spec(1))
    before = stored()
    assert bob.post("/api/app/user/train/rename", json.dumps("mine"),
                    content_type="application/json").status_code == 403
    assert alice.post("/api/app/user/train/rename", json.dumps("taken"),
                      content_type="application/json").status_code == 409
    assert alice.post("/api/app/user/train/rename", json.dumps("bad name!"),
                      content_type="application/json").status_code == 400
    assert stored() == before
    renamed = alice.post("/api/app/user/train/rename", json.dumps("train2"),
                         content_type="application/json")
    assert renamed.json() == "train2"
    assert alice.get("/api/app/user/train2/spec").content.decode() == gpu_spec(1)


def test_create_twice_is_409(alice):
    create(alice, "train", gpu_spec(1))
    before = stored()
    assert create(alice, "train", gpu_spec(2)).status_code == 409
    assert stored() == before


def test_submit_an_app_version_records_it(alice, team):
    create(alice, "train", gpu_spec(2))
    update(alice, "train", gpu_spec(4))
    info = alice.get("/api/app/user/train?version=1&limit=1").json()
    response = alice.post(
        f"/api/pool/team/workflow?app_uuid={info['uuid']}&app_version=1",
        {"file": alice.get("/api/app/user/train/spec?version=1").content.decode()},
        format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["app"] == {"uuid": info["uuid"], "name": "train", "version": 1}
    workflow = Workflow.objects.get(name=response.json()["name"])
    assert (workflow.app_name, workflow.app_version) == ("train", 1)
    assert alice.get(f"/api/workflow/{workflow.name}").json()["app"]["version"] == 1
    browser = Client()
    browser.force_login(alice.user)
    page = browser.get(f"/workflows/{workflow.name}/").content.decode()
    assert "App: <code>train</code> version 1" in page


def test_an_app_submission_meets_the_same_quota(alice, team):
    create(alice, "big", gpu_spec(32))
    uuid = alice.get("/api/app/user/big").json()["uuid"]
    response = alice.post(f"/api/pool/team/workflow?app_uuid={uuid}",
                          {"file": gpu_spec(32)}, format="json")
    assert (response.status_code, response.json()["code"]) == (409, "exceeds_quota")
    assert Workflow.objects.count() == 0


def test_an_unknown_app_version_at_submission_is_404(alice, team):
    create(alice, "train", gpu_spec(1))
    uuid = alice.get("/api/app/user/train").json()["uuid"]
    for query in (f"app_uuid={uuid}&app_version=5",
                  "app_uuid=6f1c3f8e-0000-4000-8000-000000000000"):
        response = alice.post(f"/api/pool/team/workflow?{query}", {"file": gpu_spec(1)},
                              format="json")
        assert response.status_code == 404, response.json()
    assert Workflow.objects.count() == 0
