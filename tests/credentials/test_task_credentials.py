"""A task names its submitter's credentials (OSMO's `credentials:`): another user's is a 403
at submission with nothing written; a wrong use or key is a 400."""

from __future__ import annotations

import pytest

from tests import factories
from tests.conftest import make_client
from workflows.models import Task, Workflow, WorkflowGroup, WorkflowNameCounter

pytestmark = pytest.mark.django_db
SECRET = "s3cr3t-Value-9f2c71"

SPEC = """
workflow:
  name: creds
  tasks:
  - name: main
    image: nvcr.io/team/trainer:1
    command: [sleep, "1"]
    credentials:
{uses}
"""


@pytest.fixture
def team(db):
    return factories.pool("team", 16)


@pytest.fixture
def alice(db):
    client = make_client("alice", "osmo-team-user")
    client.post("/api/credentials/omni", {"generic_credential": {"credential": {
        "omni_user": "me", "omni_pass": SECRET}}}, format="json")
    client.post("/api/credentials/ngc", {"registry_credential": {
        "registry": "nvcr.io", "username": "$oauthtoken", "auth": SECRET}}, format="json")
    return client


@pytest.fixture
def bob(db):
    client = make_client("bob", "osmo-team-user")
    client.post("/api/credentials/bobs", {"generic_credential": {"credential": {
        "k": SECRET}}}, format="json")
    return client


def submit(client, uses: str):
    return client.post("/api/pool/team/workflow", {"file": SPEC.format(uses=uses)},
                       format="json")


def stored():
    return (Workflow.objects.count(), WorkflowGroup.objects.count(), Task.objects.count(),
            list(WorkflowNameCounter.objects.values_list("spec_name", "value")))


def test_own_credentials_are_admitted(team, alice):
    response = submit(alice, "      omni: {OMNI_USER: omni_user, OMNI_PASS: omni_pass}\n"
                             "      ngc: null\n")
    assert response.status_code == 201, response.json()
    assert SECRET not in response.content.decode()


def test_another_users_credential_is_403_and_nothing_written(team, alice, bob):
    before = stored()
    response = submit(alice, "      bobs: /etc/bob\n")
    assert response.status_code == 403, response.json()
    assert response.json()["code"] == "credential_forbidden"
    assert list(response.json()["errors"]) == ["workflow.tasks[0].credentials.bobs"]
    # A name nobody has gets the same answer: other users' names are not told.
    nobody = submit(alice, "      nobody: /etc/x\n")
    assert (nobody.status_code, nobody.json()["code"]) == (403, "credential_forbidden")
    assert stored() == before


@pytest.mark.parametrize("uses, field", [
    ("      omni: {OMNI_USER: no_such_key}\n", "workflow.tasks[0].credentials.omni"),
    ("      omni: null\n", "workflow.tasks[0].credentials.omni"),
    ("      ngc: /var/lib/registry-auth\n", "workflow.tasks[0].credentials.ngc"),
    ("      omni: {1BAD: omni_user}\n", "workflow.tasks[0].credentials.omni.1BAD"),
    ("      omni: 7\n", "workflow.tasks[0].credentials.omni"),
    ("      'bad name!': /x\n", "workflow.tasks[0].credentials"),
    ("      omni: {" + ", ".join(f"V{i}: omni_user" for i in range(65)) + "}\n",
     "workflow.tasks[0].credentials.omni"),
    ("".join(f"      c{i}: /m{i}\n" for i in range(17)), "workflow.tasks[0].credentials"),
])
def test_a_wrong_use_is_400_and_nothing_written(team, alice, uses, field):
    before = stored()
    response = submit(alice, uses)
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == "invalid_spec"
    assert field in response.json()["errors"], response.json()
    assert SECRET not in response.content.decode()
    assert stored() == before
