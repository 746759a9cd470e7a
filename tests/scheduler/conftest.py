from __future__ import annotations

import pytest

from tests import factories
from tests.conftest import make_client


def spec(name: str, gpus_per_task: int, tasks: int = 1, scheduling: str = "",
         command: str = "[train]") -> str:
    task_lines = "\n".join(
        f"    - {{name: t{i}, image: x, command: {command}, resource: r"
        f"{', lead: true' if i == 0 else ''}}}" for i in range(tasks))
    return f"""
workflow:
  name: {name}
  groups:
  - name: g
{scheduling}    tasks:
{task_lines}
  resources:
    r: {{gpu: {gpus_per_task}, cpu: 1, memory: 1Gi}}
"""


def add_nodes(admin, count: int, gpus: int = 8, *, zone: str = "z1", rack_size: int = 2,
              prefix: str = "node") -> list[str]:
    names = []
    for index in range(count):
        name = f"{prefix}-{index}"
        response = admin.post("/api/cluster/nodes", {
            "name": name, "gpus": gpus, "cpu": 64, "memory": "512Gi",
            "labels": {"topology.osmo/zone": zone,
                       "topology.osmo/rack": f"{zone}-r{index // rack_size}",
                       "kubernetes.io/hostname": name}}, format="json")
        assert response.status_code == 201, response.json()
        names.append(name)
    return names


@pytest.fixture
def admin(db):
    return make_client("root", "osmo-admin")


@pytest.fixture
def alice(db):
    return make_client("alice", "osmo-team*-user", "osmo-other-user")


@pytest.fixture
def team(db):
    return factories.pool("team", 64)


def submit(client, pool: str, text: str, priority: str = "NORMAL") -> str:
    response = client.post(f"/api/pool/{pool}/workflow?priority={priority}", {"file": text},
                           format="json")
    assert response.status_code == 201, response.json()
    return response.json()["name"]


def cycle(admin) -> dict:
    response = admin.post("/api/scheduler/cycle")
    assert response.status_code == 200, response.json()
    return response.json()


def workflow(client, name: str) -> dict:
    return client.get(f"/api/workflow/{name}").json()


def nodes_of(client, name: str) -> list[str | None]:
    return [t["node"] for g in workflow(client, name)["groups"] for t in g["tasks"]]
