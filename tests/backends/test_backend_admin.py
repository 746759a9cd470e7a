"""The Django admin edits backends through the same services as the API."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from pools.models import Pool
from scheduler.models import Backend
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(user)
    return client


FORM = {"name": "east", "kind": "kubernetes", "placement": "osmo", "k8s_namespace": "jobs",
        "scheduler_name": "", "description": "the east"}


def test_admin_creates_and_updates_a_backend(staff):
    response = staff.post("/admin/scheduler/backend/add/", FORM)
    assert response.status_code == 302, response.content[:2000]
    east = Backend.objects.get(name="east")
    # The service's rule: a new backend takes the scheduler of its placement.
    assert (east.kind, east.placement, east.k8s_namespace, east.scheduler_name) == (
        "kubernetes", "osmo", "jobs", "osmo-scheduler")
    response = staff.post(f"/admin/scheduler/backend/{east.pk}/change/",
                          {**FORM, "scheduler_name": "mine", "maintenance": "on"})
    assert response.status_code == 302
    east.refresh_from_db()
    assert (east.scheduler_name, east.maintenance) == ("mine", True)


def test_admin_refuses_a_bad_namespace(staff):
    response = staff.post("/admin/scheduler/backend/add/", {**FORM, "k8s_namespace": "No!"})
    assert response.status_code == 200
    assert not Backend.objects.filter(name="east").exists()


def test_admin_delete_is_refused_while_a_pool_names_the_backend(staff):
    staff.post("/admin/scheduler/backend/add/", FORM)
    factories.pool("team", 4, backends=["east"])
    east = Backend.objects.get(name="east")
    response = staff.post("/admin/scheduler/backend/", {
        "action": "delete_backends", "_selected_action": [str(east.pk)]}, follow=True)
    assert response.status_code == 200
    assert "is in use" in response.content.decode()
    assert Backend.objects.filter(name="east").exists()
    assert Pool.objects.get(name="team").backends == ["east"]
