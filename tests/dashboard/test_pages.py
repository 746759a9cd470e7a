"""The dashboard's pages through Django's test client: figures, permissions, forms, fragments,
and a pinned query count whatever the data size."""

from __future__ import annotations

import re
from html import unescape

import pytest

from pools import services as pool_services
from pools.models import Pool, PoolEvent, SubpoolState
from tests import factories
from tests.dashboard.conftest import pool_state, session_client

pytestmark = pytest.mark.django_db

MAX_QUERIES = 10


def row(html: str, pool: str) -> str:
    """The table row of one pool as text (see `text`)."""
    match = re.search(rf'<tr class="[^"]*" data-pool="{re.escape(pool)}">(.*?)</tr>', html, re.S)
    assert match, f"no row for {pool}"
    return text(match.group(1))


def text(html: str) -> str:
    """Tags stripped (inline ones without a gap: `team<span>--</span><wbr>a` is `team--a`),
    entities decoded, whitespace collapsed."""
    html = re.sub(r"<wbr>|</?span[^>]*>", "", html)
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


# --- the pool tree -----------------------------------------------------------------------------

def test_login_required(client):
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"] == "/login/?next=/"
    assert client.get("/fragment/pools/").status_code == 302


def test_login_page_signs_in(client, db):
    from osmo.accounts import services

    user = services.user_ensure(username="alice", groups=["osmo-team-user"])
    user.set_password("s3cret-pass")
    user.save()
    page = client.get("/login/")
    assert page.status_code == 200
    assert 'for="id_username"' in page.content.decode()
    response = client.post("/login/", {"username": "alice", "password": "s3cret-pass"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").status_code == 200
    from django.test import Client

    bad = Client().post("/login/", {"username": "alice", "password": "wrong"})
    assert bad.status_code == 200 and 'role="alert"' in bad.content.decode()


def test_seed_002_tree(seed_team, team_user):
    html = team_user.get("/").content.decode()
    assert row(html, "team") == (
        "team 10 (Total: 100) unallocated 50 8 ▼ -40 (over quota: GPUs to drain)")
    assert row(html, "team--a") == "├─ team--a ACTIVE 30 5 0 25"
    assert row(html, "team--b") == "├─ team--b ACTIVE 40 10 3 30"
    assert row(html, "team--c") == "└─ team--c ACTIVE 20 0 0 20"
    # The negative parent figure is highlighted; the quota split shows the unallocated share.
    assert '<strong class="negative"><span aria-hidden="true">▼ </span>-40</strong>' in html
    assert ('aria-label="Quota split of team: a 30 GPUs, b 40 GPUs, c 20 GPUs, unallocated 10 '
            'GPUs"' in html)
    assert ('aria-label="50 of 10 GPUs used at HIGH/NORMAL priority, plus 8 at LOW priority; '
            '40 over quota"' in html)
    assert ("1 pool, 100 GPUs guaranteed, 65 used at HIGH/NORMAL and 11 at LOW."
            in text(html))


def test_user_sees_no_admin_controls(seed_team, team_user):
    html = team_user.get("/").content.decode()
    for control in ("Add subpool", "Change quota", ">Delete<", "/subpools/"):
        assert control not in html
    html = team_user.get("/pools/team/").content.decode()
    for control in ("Create a subpool", "Change quota", "Delete", "/subpools/",
                    '<form method="post" action="/pools'):
        assert control not in html


def test_admin_sees_controls(seed_team, team_admin):
    html = team_admin.get("/").content.decode()
    assert 'href="/pools/team/subpools/new/"' in html
    assert 'href="/pools/team/subpools/a/quota/"' in html
    assert 'href="/pools/team/subpools/c/delete/"' in html
    page = team_admin.get("/pools/team/").content.decode()
    assert 'action="/pools/team/subpools/new/"' in page
    assert '<label for="create-name">Subpool name</label>' in page


def test_only_visible_pools(seed_team, db):
    factories.pool("other", 8)
    outsider = session_client("outsider", "osmo-other-user")
    html = outsider.get("/").content.decode()
    assert 'data-pool="other"' in html and "team" not in html
    assert outsider.get("/pools/team/").status_code == 404
    assert outsider.get("/pools/team--a/").status_code == 404
    nobody = session_client("nobody")
    assert "No pools are visible to you" in nobody.get("/").content.decode()


def test_deleting_and_archived_subpools(seed_team, team_admin):
    team = seed_team
    b = Pool.objects.get(name="team--b")
    c = Pool.objects.get(name="team--c")
    from pools import services

    services.subpool_delete(actor=None, subpool=b)  # 2 workflows hold 13 GPUs: DELETING
    services.subpool_delete(actor=None, subpool=c)  # nothing runs: ARCHIVED
    html = team_admin.get("/").content.decode()
    assert row(html, "team--b") == (
        "└─ team--b DELETING Draining: 2 running workflows, 13 GPUs held 0 (was 40) 10 3 "
        "▼ -10 (over quota: GPUs to drain) frozen while draining")
    assert row(html, "team") == "team 70 (Total: 100) unallocated 50 8 20"
    # ARCHIVED subpools are folded away, out of the table.
    assert 'data-pool="team--c">' not in html.split("<details")[0]
    details = html.split('<details class="archived" id="archived-team">')[1].split("</details>")[0]
    assert "1 archived subpool" in details and "team--c" in details
    assert team.name == "team"


def test_tree_query_count_does_not_grow(db, django_assert_max_num_queries):
    viewer = session_client("viewer", "osmo-admin")
    for index in range(25):
        parent = factories.pool(f"p{index}", 100)
        for sub in range(4):
            subpool = factories.subpool(parent, f"s{sub}", 10)
            factories.running_workflow(subpool, 2)
        factories.running_workflow(parent, 3, "LOW")
    with django_assert_max_num_queries(MAX_QUERIES):
        response = viewer.get("/")
    assert response.status_code == 200
    assert response.content.decode().count('class="subpool-row') == 100
    with django_assert_max_num_queries(MAX_QUERIES):
        assert viewer.get("/fragment/pools/").status_code == 200


def test_pool_history_tells_each_event_in_words(db, team_user):
    team = factories.pool("team", 100, description="Demo pool team", default_platform="dgx-h100",
                          platforms={"dgx-h100": {"description": "DGX H100 nodes",
                                                  "node_selector": {"gpu": "H100"}}})
    subpool = factories.subpool(team, "a", 30)
    pool_services.subpool_update(actor=None, subpool=subpool, quota_gpus=20)
    html = team_user.get("/pools/team/").content.decode()
    body = html.split('id="history-title"')[1].split("<tbody>")[1]
    # Each row opens with its revision's link (tests/dashboard/test_browser_revisions.py).
    rows = [text(re.sub(r"<time .*?</time>|^\s*<td><a [^>]*>#\d+</a></td>", "", row))
            for row in re.findall(r'<tr data-revision="\d+">(.*?)</tr>', body, re.S)]
    assert rows == [
        "team--a Subpool quota changed system quota 30 GPUs → 20 GPUs",
        "team--a Subpool created system quota 30 GPUs; state ACTIVE",
        "team Pool created system quota 100 GPUs; limit none; status ONLINE; priority 100; "
        "over-quota weight 1; platforms dgx-h100; default platform dgx-h100; description "
        "“Demo pool team”; backends default"]


def test_fragment_is_the_tree_alone(seed_team, team_user):
    fragment = team_user.get("/fragment/pools/").content.decode()
    assert "<html" not in fragment and "site-header" not in fragment
    assert row(fragment, "team--a") == "├─ team--a ACTIVE 30 5 0 25"


# --- one pool ----------------------------------------------------------------------------------

def test_pool_page_workflows_and_history(seed_team, team_user, django_assert_max_num_queries):
    a = Pool.objects.get(name="team--a")
    factories.pending_workflow(a, 4, "HIGH")
    for _ in range(30):
        factories.running_workflow(a, 1)
    with django_assert_max_num_queries(MAX_QUERIES):
        response = team_user.get("/pools/team/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "Running (35)" in text(html) and "Pending (1)" in text(html)
    assert html.count('<table class="workflows" data-kind="running">') == 1
    history = html.split('id="history-title"')[1]
    assert 'data-action="subpool_created">Subpool created<' in history
    assert 'data-action="pool_created">Pool created<' in history
    assert "quota 30 GPUs; state ACTIVE" in history

    with django_assert_max_num_queries(MAX_QUERIES):
        sub = team_user.get("/pools/team--a/")
    sub_html = sub.content.decode()
    assert "Subpool team--a" in sub_html
    assert "Running (31)" in text(sub_html) and "Pending (1)" in text(sub_html)
    # 35 GPUs run on a 30-GPU quota: Available is negative, and marked so.
    assert re.search(r'<dd class="available">\s*<strong class="negative">.*?-5</strong>', sub_html)
    with django_assert_max_num_queries(MAX_QUERIES):
        fragment = team_user.get("/pools/team--a/fragment/")
    assert "<html" not in fragment.content.decode()
    assert "Running (31)" in text(fragment.content.decode())


def test_pool_page_unknown(team_user):
    response = team_user.get("/pools/nope/")
    assert response.status_code == 404
    assert "Pool &#x27;nope&#x27; does not exist." in response.content.decode()


# --- admin forms -------------------------------------------------------------------------------

def test_create_subpool(seed_team, team_admin):
    seed_team_pool = Pool.objects.get(name="team")
    Pool.objects.filter(name="team--c").update(quota_gpus=10)  # leave 20 unallocated
    response = team_admin.post("/pools/team/subpools/new/", {"name": "d", "quota_gpus": "15"})
    assert response.status_code == 302 and response["Location"] == "/pools/team/"
    created = Pool.objects.get(name="team--d")
    assert (created.parent_id, created.quota_gpus, created.subpool_state) == (
        "team", 15, SubpoolState.ACTIVE)
    event = PoolEvent.objects.filter(pool=created).get()
    assert (event.action, event.actor_name) == ("subpool_created", "team-admin")
    page = team_admin.get(response["Location"]).content.decode()
    assert "Subpool team--d created with 15 GPUs." in page
    assert seed_team_pool.quota_gpus == 100


@pytest.mark.parametrize(("body", "status", "message"), [
    ({"name": "d", "quota_gpus": "11"}, 409,
     "Pool &#x27;team&#x27; has 100 GPUs, 90 of them already in ACTIVE subpools: 10 unallocated, "
     "11 requested."),
    ({"name": "a", "quota_gpus": "1"}, 409, "Subpool &#x27;team--a&#x27; already exists (ACTIVE)."),
    ({"name": "bad--name", "quota_gpus": "1"}, 400,
     "&#x27;bad--name&#x27; is not a valid subpool name"),
    ({"name": "d", "quota_gpus": "-1"}, 400, "Ensure this value is greater than or equal to 0."),
    ({"name": "", "quota_gpus": ""}, 400, "This field is required."),
])
def test_create_subpool_refused(seed_team, team_admin, body, status, message):
    before = pool_state()
    response = team_admin.post("/pools/team/subpools/new/", body)
    html = response.content.decode()
    assert response.status_code == status
    assert message in html
    assert 'aria-invalid="true"' in html
    assert pool_state() == before


def test_change_quota(seed_team, team_admin):
    page = team_admin.get("/pools/team/subpools/a/quota/")
    assert 'value="30"' in page.content.decode()
    response = team_admin.post("/pools/team/subpools/a/quota/", {"quota_gpus": "2"})
    assert response.status_code == 302
    assert Pool.objects.get(name="team--a").quota_gpus == 2
    html = team_admin.get("/").content.decode()
    # A soft decrease: 5 GPUs still run on a 2-GPU quota.
    assert row(html, "team--a").startswith("├─ team--a ACTIVE 2 5 0 ▼ -3")
    same = team_admin.post("/pools/team/subpools/a/quota/", {"quota_gpus": "2"})
    assert same.status_code == 302  # unchanged quota: nothing to do, no error


def test_change_quota_refused(seed_team, team_admin):
    from pools import services

    services.subpool_delete(actor=None, subpool=Pool.objects.get(name="team--b"))
    before = pool_state()
    too_much = team_admin.post("/pools/team/subpools/a/quota/", {"quota_gpus": "81"})
    assert too_much.status_code == 409
    assert "already in ACTIVE subpools" in too_much.content.decode()
    frozen = team_admin.post("/pools/team/subpools/b/quota/", {"quota_gpus": "1"})
    assert frozen.status_code == 409
    assert ("Subpool &#x27;team--b&#x27; is DELETING; only ACTIVE subpools can change quota."
            in frozen.content.decode())
    assert team_admin.post("/pools/team/subpools/zz/quota/", {"quota_gpus": "1"}).status_code == 404
    assert pool_state() == before


def test_delete_subpool(seed_team, team_admin):
    confirm = team_admin.get("/pools/team/subpools/c/delete/").content.decode()
    assert "ARCHIVED</strong> at once" in confirm
    response = team_admin.post("/pools/team/subpools/c/delete/")
    assert response.status_code == 302
    assert Pool.objects.get(name="team--c").subpool_state == SubpoolState.ARCHIVED
    confirm = team_admin.get("/pools/team/subpools/a/delete/").content.decode()
    assert "1 running workflow holds 5 GPUs" in confirm
    team_admin.post("/pools/team/subpools/a/delete/")
    assert Pool.objects.get(name="team--a").subpool_state == SubpoolState.DELETING
    page = team_admin.get("/pools/team/").content.decode()
    assert "Subpool team--a is DELETING" in page
    again = team_admin.post("/pools/team/subpools/a/delete/")  # idempotent
    assert again.status_code == 302


def test_users_cannot_write(seed_team, team_user):
    before = pool_state()
    for url, body in (("/pools/team/subpools/new/", {"name": "d", "quota_gpus": "1"}),
                      ("/pools/team/subpools/a/quota/", {"quota_gpus": "1"}),
                      ("/pools/team/subpools/a/delete/", {})):
        assert team_user.post(url, body).status_code == 403
        assert team_user.get(url).status_code == 403
    assert pool_state() == before


def test_outsiders_get_404(seed_team, db):
    outsider = session_client("outsider", "osmo-other-admin")
    before = pool_state()
    assert outsider.post("/pools/team/subpools/new/",
                         {"name": "d", "quota_gpus": "1"}).status_code == 404
    assert outsider.post("/pools/team/subpools/a/delete/").status_code == 404
    assert pool_state() == before


def test_csrf_is_enforced(seed_team, db):
    from django.test import Client

    from osmo.accounts import services

    client = Client(enforce_csrf_checks=True)
    client.force_login(services.user_ensure(username="team-admin", groups=["osmo-team-admin"]))
    before = pool_state()
    assert client.post("/pools/team/subpools/a/delete/").status_code == 403
    assert pool_state() == before


def test_token_sign_in(client, db):
    """`osmo standalone` prints a token, not a password: it opens the dashboard too."""
    from osmo.accounts import services

    user = services.user_ensure(username="admin", groups=["osmo-admin"])
    token = services.token_issue(user=user)
    page = client.get("/login/").content.decode()
    assert '<label for="token-token">Access token</label>' in page
    # The form the README names comes first; its help shows commands as code, not backticks.
    headings = re.findall(r"<h2 [^>]*>([^<]+)</h2>", page)
    assert headings == ["Sign in with an access token", "Or sign in with a password"]
    assert ("The token <code>osmo standalone</code> printed, or one from <code>osmo token "
            "create</code> or <code>manage.py issue_token</code>.") in page
    assert "`" not in text(page)
    bad = client.post("/login/token/", {"token": "osmo_nope", "next": "/cluster/"})
    assert bad.status_code == 400
    assert "This token is not valid (or was revoked)." in bad.content.decode()
    assert client.get("/").status_code == 302
    evil = client.post("/login/token/", {"token": token, "next": "https://evil.example/"})
    assert evil["Location"] == "/"
    response = client.post("/login/token/", {"token": token, "next": "/cluster/"})
    assert response.status_code == 302 and response["Location"] == "/cluster/"
    assert client.get("/").status_code == 200
    services.tokens_revoke_all(user=user)
    from django.test import Client

    assert Client().post("/login/token/", {"token": token}).status_code == 400


def test_favicon_is_served_to_anyone(client, db):
    response = client.get("/favicon.ico")
    assert (response.status_code, response["Content-Type"]) == (200, "image/x-icon")
    assert response.content[:4] == b"\x00\x00\x01\x00"  # an icon file
    assert 'rel="icon" href="/favicon.ico"' in client.get("/login/").content.decode()


def test_a_session_ended_by_a_revoked_token_says_so_on_the_sign_in_page(client, db):
    from osmo.accounts import services

    user = services.user_ensure(username="admin", groups=["osmo-admin"])
    token = services.token_issue(user=user)
    words = "Your session ended: its token was revoked. Sign in again with a token that is " \
            "still valid."
    assert words not in client.get("/login/").content.decode()  # nothing ended yet
    assert client.post("/login/token/", {"token": token})["Location"] == "/"
    services.tokens_revoke_all(user=user)
    ended = client.get("/cluster/")
    assert (ended.status_code, ended["Location"]) == (302, "/login/?next=/cluster/")
    page = client.get(ended["Location"])
    assert page.status_code == 200
    assert f'<li class="message warning" id="session-ended">{words}</li>' in page.content.decode()
    assert words not in client.get("/login/").content.decode()  # said once
    # A sign-out of one's own is no revocation: nothing to say.
    other = services.token_issue(user=user)
    client.post("/login/token/", {"token": other})
    client.post("/logout/")
    assert words not in client.get("/login/").content.decode()


def test_a_revision_page_is_only_for_who_sees_its_pool(db):
    from pools.models import PoolEvent
    from tests import factories as more

    more.pool("team", 10)
    more.pool("other", 10)
    team = PoolEvent.objects.get(pool__name="team").revision
    other = PoolEvent.objects.get(pool__name="other").revision
    viewer = session_client("viewer", "osmo-team-user")
    assert viewer.get(f"/pools/team/revisions/{team}/").status_code == 200
    for path in (f"/pools/team/revisions/{other}/",  # another pool's revision
                 f"/pools/team/revisions/{2**40}/", f"/pools/other/revisions/{other}/"):
        response = viewer.get(path)
        assert response.status_code == 404, path
