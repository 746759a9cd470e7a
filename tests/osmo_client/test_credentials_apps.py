"""`osmo credential set|list|delete` and `osmo app create|update|info|show|spec|list|delete|
rename|submit` as client 6.4.0 sends them (a replay: requests written by hand from the
client's `src/cli/credential.py` and `src/cli/app.py`, not a recorded transcript —
``replay.py``), and the fields it reads back."""

from __future__ import annotations

import pytest

from credentials.models import Credential
from tests import factories
from workflows.models import Workflow

from .test_workflows import SPEC, TEMPLATED, submit

pytestmark = pytest.mark.django_db
SECRET = "s3cr3t-Value-9f2c71"


def credential_set(osmo, name: str, cred_type: str, payload: list[str]):
    """`_run_set_command`: key=value pairs; GENERIC nests them under `credential`."""
    body = dict(item.split("=", 1) for item in payload)
    if cred_type == "GENERIC":
        body = {"credential": body}
    return osmo.raw("POST", f"api/credentials/{name}",
                    payload={cred_type.lower() + "_credential": body})


def test_credential_set_list_delete(osmo_as):
    osmo = osmo_as("alice", "osmo-team-user")
    for name, cred_type, payload in (
            ("ngc", "REGISTRY", ["registry=nvcr.io", "username=$oauthtoken", f"auth={SECRET}"]),
            ("bucket", "DATA", ["access_key_id=AKIA", f"access_key={SECRET}",
                                "endpoint=s3://bucket"]),
            ("omni", "GENERIC", ["omni_user=me", f"omni_pass={SECRET}"])):
        response = credential_set(osmo, name, cred_type, payload)
        assert response.status_code == 200, response.content
        assert SECRET not in response.content.decode()
    listed = osmo.request("GET", "api/credentials")
    # `_run_list_command` prints cred_name, cred_type, profile.
    assert [[c.get(k, "-") for k in ("cred_name", "cred_type", "profile")]
            for c in listed["credentials"]] == [
        ["ngc", "REGISTRY", "nvcr.io"], ["omni", "GENERIC", None], ["bucket", "DATA",
                                                                     "s3://bucket"]]
    deleted = osmo.request("DELETE", "api/credentials/bucket")
    # `_run_delete_command` reads the first entry's type and profile (its local config).
    assert (deleted["credentials"][0]["cred_type"], deleted["credentials"][0]["profile"]) == (
        "DATA", "s3://bucket")
    assert sorted(Credential.objects.values_list("name", flat=True)) == ["ngc", "omni"]


def test_credential_set_of_an_unknown_key_is_refused(osmo_as):
    osmo = osmo_as("alice", "osmo-team-user")
    response = credential_set(osmo, "ngc", "REGISTRY", ["registry=nvcr.io", "token=x"])
    assert response.status_code == 400  # the client prints the detail
    assert Credential.objects.count() == 0


def test_app_commands(osmo_as):
    osmo = osmo_as("alice", "osmo-team-user")
    factories.pool("team", 20)
    # create: POST with the description as a query parameter and the content as the body
    created = osmo.raw("POST", "api/app/user/train", params={"description": "trains"},
                       payload=SPEC)
    assert created.status_code == 201, created.content
    # update: GET the spec (plain text), then PATCH the new content
    current = osmo.raw("GET", "api/app/user/train/spec")
    assert current.content.decode() == SPEC
    updated = osmo.request("PATCH", "api/app/user/train", payload=TEMPLATED)
    assert (updated["name"], updated["version"]) == ("train", 2)
    # info: order and limit; prints uuid, owner, created_date, description, versions
    info = osmo.request("GET", "api/app/user/train", params={"order": "ASC", "limit": 20})
    assert (info["owner"], info["description"]) == ("alice", "trains")
    assert [[v[k] for k in ("version", "created_by", "status")] for v in info["versions"]] == [
        [1, "alice", "READY"], [2, "alice", "READY"]]
    assert info["created_date"] and info["uuid"]
    # show: info, then the spec of the version asked for; spec: the spec
    assert osmo.raw("GET", "api/app/user/train/spec",
                    params={"version": 1}).content.decode() == SPEC
    # list: order, limit, offset; prints owner, name, description, created_date, latest_version
    listed = osmo.request("GET", "api/app", params={"order": "ASC", "limit": 20, "offset": 0})
    assert [[a[k] for k in ("owner", "name", "description", "latest_version")]
            for a in listed["apps"]] == [["alice", "train", "trains", "2"]]
    assert listed["more_entries"] is False
    everyone = osmo.request("GET", "api/app", params={"order": "DESC", "all_users": True,
                                                      "limit": 20, "offset": 0})
    assert [a["name"] for a in everyone["apps"]] == ["train"]
    # submit: info with limit 1 (the version's entry), the spec, then a workflow submission
    # carrying app_uuid and app_version
    one = osmo.request("GET", "api/app/user/train", params={"version": 1, "limit": 1})
    spec = osmo.raw("GET", "api/app/user/train/spec", params={"version": 1}).content.decode()
    result = submit_app(osmo, spec, pool="team", uuid=one["uuid"],
                        version=one["versions"][0]["version"])
    workflow = Workflow.objects.get(name=result["name"])
    assert (workflow.app_name, workflow.app_version) == ("train", 1)
    # rename: the new name as the body; the answer is the new name
    assert osmo.request("POST", "api/app/user/train/rename", payload="trainer") == "trainer"
    # delete: one version, then all
    assert osmo.request("DELETE", "api/app/user/trainer", params={"version": 1}) == {
        "versions": [1]}
    assert osmo.request("DELETE", "api/app/user/trainer",
                        params={"all_versions": True}) == {"versions": [2]}
    assert osmo.raw("GET", "api/app/user/trainer/spec").status_code == 404


def submit_app(osmo, spec: str, *, pool: str, uuid: str, version: int):
    """`_submit_app`: `submit_workflow_helper` with the app's parameters."""
    original = osmo.request

    def with_app(method, endpoint, **kwargs):
        if endpoint.endswith("/workflow"):
            kwargs["params"] = {"app_uuid": uuid, "app_version": version,
                                **(kwargs.get("params") or {})}
        return original(method, endpoint, **kwargs)

    osmo.request = with_app
    try:
        return submit(osmo, spec, pool=pool)
    finally:
        osmo.request = original
