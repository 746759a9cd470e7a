"""GET /api/workflow by cursor (keyset pages): `next` and `previous` carry a cursor, walking
them gives every visible workflow once in the list's order (ties of submission time
included), and a cursor that is not one the list gave is a 400 that changes nothing."""

from __future__ import annotations

import base64
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection
from django.utils import timezone

from osmo.keyset import EPOCH
from tests import factories
from tests.conftest import make_client
from workflows.models import Workflow, WorkflowStatus

pytestmark = pytest.mark.django_db

ROWS = 23


@pytest.fixture
def listed(db):
    """ROWS workflows in two pools; three pairs share a submission time (ties by id)."""
    team, other = factories.pool("team", 10), factories.pool("other", 10)
    owner = make_client("owner", "osmo-team-user").user
    Workflow.objects.bulk_create(
        Workflow(name=f"w-{i}", pool=team if i % 4 else other, user=owner,
                 status=WorkflowStatus.COMPLETED if i % 3 else WorkflowStatus.FAILED)
        for i in range(ROWS))
    now = timezone.now()
    with connection.cursor() as cursor:  # ids 2k and 2k+1 share a minute for the first six
        cursor.execute(f"UPDATE {Workflow._meta.db_table} SET submitted_at = %s - "
                       "(CASE WHEN id - %s < 6 THEN (id - %s) / 2 ELSE id END) * "
                       "interval '1 minute'", [now, first_id(), first_id()])
    return make_client("platform-admin", "osmo-admin")


def first_id() -> int:
    return Workflow.objects.order_by("id").values_list("id", flat=True).first()


def expected(order: str = "DESC", **filters) -> list[str]:
    keys = ("-submitted_at", "-id") if order == "DESC" else ("submitted_at", "id")
    return list(Workflow.objects.filter(**filters).order_by(*keys).values_list("name", flat=True))


def walk(client, path: str, link: str = "next") -> tuple[list[list[str]], list[dict]]:
    pages, bodies = [], []
    while path:
        response = client.get(path)
        assert response.status_code == 200, response.content
        body = response.json()
        pages.append([w["name"] for w in body["results"]])
        bodies.append(body)
        path = body[link]
    return pages, bodies


def query_of(link: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(link).query)


@pytest.mark.parametrize("order", ["DESC", "ASC"])
def test_next_links_walk_every_workflow_once_in_order(listed, order):
    pages, bodies = walk(listed, f"/api/workflow?limit=4&order={order}")
    assert [len(p) for p in pages] == [4, 4, 4, 4, 4, 3]
    assert sum(pages, []) == expected(order)
    assert bodies[0]["previous"] is None and bodies[-1]["next"] is None
    for body in bodies[:-1]:
        link = query_of(body["next"])
        assert set(link) == {"limit", "order", "cursor"}, link  # no offset
        assert body["more_entries"] is True
    assert all((b["count"], b["count_is_estimate"]) == (ROWS, False) for b in bodies)


def test_previous_links_walk_back_to_the_first_page(listed):
    pages, bodies = walk(listed, "/api/workflow?limit=5")
    back, back_bodies = walk(listed, bodies[-1]["previous"], link="previous")
    assert back == pages[-2::-1]  # the same pages, last but one to first
    assert back_bodies[-1]["previous"] is None
    assert back_bodies[-1]["next"] and query_of(back_bodies[-1]["next"])["cursor"]


def test_an_offset_page_links_by_cursor_and_filters_are_kept(listed):
    body = listed.get("/api/workflow?limit=3&offset=3&pool=team&status=COMPLETED").json()
    want = expected(pool__name="team", status=WorkflowStatus.COMPLETED)
    assert [w["name"] for w in body["results"]] == want[3:6]
    after = listed.get(body["next"]).json()
    before = listed.get(body["previous"]).json()
    assert [w["name"] for w in after["results"]] == want[6:9]
    assert [w["name"] for w in before["results"]] == want[0:3]
    assert query_of(body["next"])["pool"] == ["team"]
    assert query_of(body["next"])["status"] == ["COMPLETED"]


def test_the_osmo_clients_offset_pages_are_unchanged(listed):
    want = expected()
    got = []
    for offset in range(0, ROWS, 10):
        body = listed.get(f"/api/workflow?limit=10&offset={offset}").json()
        got += [w["name"] for w in body["workflows"]]
        assert body["more_entries"] is (offset + 10 < ROWS)
    assert got == want


def encoded(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


@pytest.mark.parametrize("cursor", [
    "x", "!!!", "a" * 97, "８８", encoded("v2|D|F|1|1"), encoded("v1|D|F|1|"),
    encoded("v1|D|X|1|1"), encoded("v1|D|F|-99999999999999999|1"),
    encoded("v1|D|F|1|99999999999999999999"), encoded("v1|D|F|1|1|1"),
    encoded("v1|A|F|1|1"),  # made for the other order
])
def test_a_malformed_cursor_is_a_400(listed, cursor):
    before = Workflow.objects.count()
    response = listed.get("/api/workflow", {"cursor": cursor})
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid_request" and list(body["errors"]) == ["cursor"]
    assert Workflow.objects.count() == before


def test_cursor_and_offset_together_is_a_400(listed):
    link = listed.get("/api/workflow?limit=2").json()["next"]
    response = listed.get(link + "&offset=4")
    assert response.status_code == 400
    assert response.json()["errors"] == {"cursor": ["Give `cursor` or `offset`, not both."]}


def test_a_cursor_past_the_end_is_an_empty_page(listed):
    oldest = Workflow.objects.order_by("submitted_at", "id").first()
    time = (oldest.submitted_at - timedelta(days=1) - EPOCH) // timedelta(microseconds=1)
    body = listed.get("/api/workflow", {"cursor": encoded(f"v1|D|F|{time}|1")}).json()
    assert (body["results"], body["next"], body["previous"], body["count"]) == (
        [], None, None, ROWS)
