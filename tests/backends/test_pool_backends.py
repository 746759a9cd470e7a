"""A top-level pool lists its backends; its subpools inherit them (API.md "Backends")."""

from __future__ import annotations

import pytest

from pools.models import Pool, PoolEvent
from tests import factories

pytestmark = pytest.mark.django_db


def put(client, name: str, **body):
    return client.put(f"/api/configs/pool/{name}", {"quota_gpus": 10, **body}, format="json")


def test_a_pool_names_the_default_backend_unless_told(admin_client):
    body = put(admin_client, "team").json()
    assert (body["backends"], body["backend"]) == (["default"], "default")


def test_backends_in_order_and_subpools_inherit_them(admin_client):
    admin_client.post("/api/configs/backend/east", {"kind": "kubernetes"}, format="json")
    response = put(admin_client, "team", backends=["east", "default"])
    assert response.status_code == 201, response.json()
    assert (response.json()["backends"], response.json()["backend"]) == (
        ["east", "default"], "east")
    admin_client.post("/api/configs/pool/team/subpool", {"name": "a", "quota_gpus": 4},
                      format="json")
    sub = admin_client.get("/api/configs/pool/team--a").json()
    assert (sub["backends"], sub["backend"]) == (["east", "default"], "east")
    assert Pool.objects.get(name="team").backends == ["east", "default"]
    listed = admin_client.get("/api/configs/backend/east").json()["pools"]
    assert listed == ["team"]


def test_osmo_single_backend_field_is_the_first(admin_client):
    admin_client.post("/api/configs/backend/east", {"kind": "embedded"}, format="json")
    body = put(admin_client, "team", backend="east").json()
    assert body["backends"] == ["east"]


def test_an_unknown_backend_is_400_and_changes_nothing(admin_client):
    factories.pool("team", 10)
    before = (list(Pool.objects.values()), PoolEvent.objects.count())
    response = put(admin_client, "team", backends=["default", "nowhere"])
    assert response.status_code == 400
    assert response.json()["code"] == "backend_not_found"
    assert response.json()["errors"] == {"backends": ["Unknown backend: nowhere."]}
    assert (list(Pool.objects.values()), PoolEvent.objects.count()) == before
    response = put(admin_client, "fresh", backends=["nowhere"])
    assert response.status_code == 400
    assert not Pool.objects.filter(name="fresh").exists()


@pytest.mark.parametrize("body", [{"backends": []}, {"backends": ["default", "default"]},
                                  {"backends": "default"}, {"backends": ["x" * 64]},
                                  {"backends": ["default"], "backend": "east"}])
def test_bad_backend_lists_are_400(admin_client, body):
    response = put(admin_client, "team", **body)
    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert not Pool.objects.filter(name="team").exists()


def test_the_default_backend_is_made_again_when_its_row_is_gone(admin_client):
    from scheduler.models import Backend

    Backend.objects.all().delete()  # a database flushed since the migration
    assert put(admin_client, "team").status_code == 201
    assert put(admin_client, "team", backends=["default"], quota_gpus=11).status_code == 200
    assert list(Backend.objects.values_list("name", "kind")) == [("default", "embedded")]
