"""A workflow group carries `backend`: where it was dispatched, `null` until then — in the
workflow object, in `explain` and on the dashboard's workflow page. The embedded loop records
the backend of the nodes it binds the group's tasks to."""

from __future__ import annotations

import pytest

from pools.models import Pool
from tests.dashboard.conftest import session_client
from workflows.models import WorkflowGroup

from .conftest import add_nodes, cycle, spec, submit, workflow

pytestmark = pytest.mark.django_db


def backends_of(client, name: str) -> tuple[list, list]:
    explained = client.get(f"/api/workflow/{name}/explain").json()
    return ([g["backend"] for g in workflow(client, name)["groups"]],
            [g["backend"] for g in explained["groups"]])


def test_a_group_is_null_until_bound_then_names_its_nodes_backend(admin, alice, team):
    add_nodes(admin, 1)
    name = submit(alice, "team", spec("train", 4))
    assert backends_of(alice, name) == ([None], [None])
    viewer = session_client("viewer", "osmo-team-user")
    assert 'data-backend=""' in viewer.get(f"/workflows/{name}/").content.decode()
    assert cycle(admin)["bound"] == 1
    assert backends_of(alice, name) == (["default"], ["default"])
    html = viewer.get(f"/workflows/{name}/").content.decode()
    assert 'data-backend="default">default</a>' in html


def test_a_group_bound_on_another_embedded_backends_node_names_that_backend(admin, alice, team):
    response = admin.post("/api/configs/backend/lab", {"kind": "embedded"}, format="json")
    assert response.status_code == 201, response.json()
    response = admin.post("/api/cluster/nodes", {"name": "lab-0", "gpus": 8, "cpu": 64,
                                                 "memory": "512Gi", "backend": "lab"},
                          format="json")
    assert response.status_code == 201, response.json()
    Pool.objects.filter(name="team").update(backends=["lab"])  # the pool's cluster
    name = submit(alice, "team", spec("train", 8))
    too_big = submit(alice, "team", spec("big", 8))  # the only node is full: stays pending
    assert cycle(admin)["bound"] == 1
    assert backends_of(alice, name) == (["lab"], ["lab"])
    assert backends_of(alice, too_big) == ([None], [None])
    assert dict(WorkflowGroup.objects.values_list("workflow__name", "backend")) == {
        name: "lab", too_big: None}
