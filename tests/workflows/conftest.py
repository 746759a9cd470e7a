from __future__ import annotations

import pytest

from tests import factories
from tests.conftest import make_client
from tests.shared_data import osmo_examples

PLATFORMS = {
    "ovx-l40": {"description": "OVX L40", "node_selector": {"nvidia.com/gpu.product": "L40"}},
    "dgx-h100": {"description": "DGX H100", "node_selector": {"nvidia.com/gpu.product": "H100"}},
}

ONE_GPU = """
workflow:
  name: {name}
  tasks:
  - name: main
    image: ubuntu
    command: [sleep, "1"]
    resource: gpu
  resources:
    gpu:
      gpu: {gpus}
      cpu: 1
      memory: 1Gi
"""


def gpu_spec(gpus: int, name: str = "job") -> str:
    return ONE_GPU.format(gpus=gpus, name=name)


def example(name: str) -> str:
    return (osmo_examples() / name).read_text()


@pytest.fixture
def team(db):
    return factories.pool("team", 100, platforms=PLATFORMS, default_platform="dgx-h100")


@pytest.fixture
def user(db):
    return make_client("ml-user", "osmo-team-user")


@pytest.fixture
def backend(db):
    return make_client("listener", "osmo-backend")


def submit(client, pool: str, spec: str, priority: str | None = None, **body):
    path = f"/api/pool/{pool}/workflow"
    if priority:
        path += f"?priority={priority}"
    return client.post(path, {"file": spec, **body}, format="json")
