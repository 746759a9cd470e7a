"""The Django admin writes through the same services as the API: same rules, same audit."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from pools.models import Pool, PoolEvent
from tests import factories

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client):
    user = get_user_model().objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(user)
    return client


def change_form(pool: Pool, **overrides) -> dict:
    data = {"quota_gpus": pool.quota_gpus, "limit_gpus": pool.limit_gpus,
            "weight": pool.weight, "priority": pool.priority,
            "description": pool.description, "platforms": "{}", "default_platform": "",
            "status": pool.status,
            "events-TOTAL_FORMS": "0", "events-INITIAL_FORMS": "0"}
    subpools = list(pool.subpools.order_by("subpool_name"))
    rows = overrides.pop("rows", [])
    data.update({"subpools-TOTAL_FORMS": str(len(subpools) + len(rows)),
                 "subpools-INITIAL_FORMS": str(len(subpools))})
    for index, sub in enumerate(subpools):
        data[f"subpools-{index}-id"] = str(sub.pk)
        data[f"subpools-{index}-parent"] = pool.name
        data[f"subpools-{index}-subpool_name"] = sub.subpool_name
        data[f"subpools-{index}-quota_gpus"] = str(sub.quota_gpus)
    for offset, row in enumerate(rows, start=len(subpools)):
        data[f"subpools-{offset}-parent"] = pool.name
        for key, value in row.items():
            data[f"subpools-{offset}-{key}"] = value
    data.update(overrides)
    return data


def test_admin_creates_subpools_with_audit(staff):
    team = factories.pool("team", 100)
    response = staff.post(f"/admin/pools/pool/{team.pk}/change/", change_form(
        team, rows=[{"subpool_name": "a", "quota_gpus": "30"},
                    {"subpool_name": "b", "quota_gpus": "40"}]))
    assert response.status_code == 302, response.content[:2000]
    assert sorted(Pool.objects.filter(parent=team).values_list("name", "quota_gpus")) == [
        ("team--a", 30), ("team--b", 40)]
    events = PoolEvent.objects.filter(action="subpool_created")
    assert sorted(events.values_list("actor_name", flat=True)) == ["root", "root"]


def test_admin_cannot_break_the_quota_invariant(staff):
    team = factories.pool("team", 100)
    factories.subpool(team, "a", 30)
    before = (list(Pool.objects.values()), PoolEvent.objects.count())
    response = staff.post(f"/admin/pools/pool/{team.pk}/change/", change_form(
        team, rows=[{"subpool_name": "b", "quota_gpus": "50"},
                    {"subpool_name": "c", "quota_gpus": "21"}]), follow=True)
    assert "Not saved:" in response.content.decode()
    assert "quota" in response.content.decode()
    assert (list(Pool.objects.values()), PoolEvent.objects.count()) == before
    # Lowering the parent below its subpools is refused the same way.
    response = staff.post(f"/admin/pools/pool/{team.pk}/change/",
                          change_form(team, quota_gpus="29"), follow=True)
    assert "Not saved:" in response.content.decode()
    assert (list(Pool.objects.values()), PoolEvent.objects.count()) == before


def test_admin_moves_quota_between_subpools_in_one_save(staff):
    team = factories.pool("team", 100)
    factories.subpool(team, "a", 60)
    factories.subpool(team, "b", 40)
    data = change_form(team)
    data["subpools-0-quota_gpus"] = "20"   # shrink a ...
    data["subpools-1-quota_gpus"] = "80"   # ... to grow b
    assert staff.post(f"/admin/pools/pool/{team.pk}/change/", data).status_code == 302
    assert sorted(Pool.objects.filter(parent=team).values_list("subpool_name", "quota_gpus")) == [
        ("a", 20), ("b", 80)]


def test_admin_delete_checkbox_drains_or_archives(staff):
    team = factories.pool("team", 100)
    busy = factories.subpool(team, "a", 10)
    factories.subpool(team, "b", 10)
    factories.running_workflow(busy, 2)
    data = change_form(team)
    data["subpools-0-delete_subpool"] = "on"
    data["subpools-1-delete_subpool"] = "on"
    assert staff.post(f"/admin/pools/pool/{team.pk}/change/", data).status_code == 302
    assert sorted(Pool.objects.filter(parent=team).values_list("subpool_name",
                                                                "subpool_state")) == [
        ("a", "DELETING"), ("b", "ARCHIVED")]
    assert Pool.objects.filter(parent=team).count() == 2  # never hard-deleted


def test_admin_rejects_bad_names_as_field_errors(staff):
    before = Pool.objects.count()
    response = staff.post("/admin/pools/pool/add/", {
        "name": "bad--name", "quota_gpus": "1", "limit_gpus": "-1", "weight": "1",
        "priority": "100", "description": "", "platforms": "{}", "default_platform": "",
        "status": "ONLINE", "subpools-TOTAL_FORMS": "0", "subpools-INITIAL_FORMS": "0",
        "events-TOTAL_FORMS": "0", "events-INITIAL_FORMS": "0"})
    assert response.status_code == 200
    assert "is not a valid pool name" in response.content.decode()
    assert Pool.objects.count() == before


def test_admin_archive_action_refuses_pools_in_use(staff):
    team = factories.pool("team", 10)
    factories.subpool(team, "a", 1)
    idle = factories.pool("idle", 10)
    response = staff.post("/admin/pools/pool/", {
        "action": "archive_pools", "_selected_action": [team.pk, idle.pk]}, follow=True)
    assert "is in use" in response.content.decode()
    team.refresh_from_db()
    idle.refresh_from_db()
    assert team.archived_at is None and idle.archived_at is not None


def test_a_refused_row_keeps_the_typed_values_and_says_why_on_that_row(staff):
    team = factories.pool("team", 100)
    factories.subpool(team, "a", 30)
    before = (list(Pool.objects.values()), PoolEvent.objects.count())
    response = staff.post(f"/admin/pools/pool/{team.pk}/change/", change_form(
        team, rows=[{"subpool_name": "big", "quota_gpus": "71"}]))
    html = response.content.decode()
    assert response.status_code == 200  # the form again, not a redirect
    assert 'name="subpools-1-subpool_name" value="big"' in html
    assert 'name="subpools-1-quota_gpus" value="71"' in html
    row = html[html.index('id="subpools-1"'):]
    row = row[:row.index("</tr>")]
    assert "Not saved:" in html[html.index("subpools-1") - 2000:html.index('id="subpools-1"')] \
        or "Not saved:" in row
    assert (list(Pool.objects.values()), PoolEvent.objects.count()) == before


def test_subpool_rows_show_usage_platforms_are_a_form_history_is_readable(staff):
    team = factories.pool("team", 100)
    sub = factories.subpool(team, "a", 30)
    factories.running_workflow(sub, 5, "NORMAL")
    factories.running_workflow(sub, 3, "LOW")
    data = change_form(team, platforms="dgx: DGX H100; nvidia.com/gpu.product=H100\n",
                       default_platform="dgx")
    assert staff.post(f"/admin/pools/pool/{team.pk}/change/", data).status_code == 302
    team.refresh_from_db()
    assert team.platforms == {"dgx": {"description": "DGX H100",
                                      "node_selector": {"nvidia.com/gpu.product": "H100"}}}
    html = staff.get(f"/admin/pools/pool/{team.pk}/change/").content.decode()
    assert "5 used, 3 LOW, 25 available" in html
    assert "dgx: DGX H100; nvidia.com/gpu.product=H100" in html
    assert "default_platform: - → dgx" in html
    assert "{&#x27;" not in html and "{'" not in html  # no Python dicts in the history
    response = staff.post(f"/admin/pools/pool/{team.pk}/change/",
                          change_form(team, platforms="no colon here"))
    assert "Line 1: write `name: description; label=value, ...`." in response.content.decode()
