"""The dashboard in a real headless Chromium (Debian's `chromium`, driven by Playwright) against
the live server: seed 002's tree, live figures, an admin's create and delete through the page,
and a user who gets no admin controls. Screenshots go to test-artifacts/dashboard/."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from osmo.accounts import services as accounts
from pools.models import Pool, SubpoolState
from tests import factories

CHROMIUM = os.environ.get("OSMO_TEST_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "dashboard"
PASSWORD = "browser-test-pass"

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(not Path(CHROMIUM).exists(),
                       reason="Debian's chromium is missing (apt-get install -y chromium)"),
]
expect = sync_api.expect


@pytest.fixture(scope="module")
def browser():
    # Playwright's sync API keeps an event loop in this thread; the test's own ORM calls are
    # still plain synchronous code.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_api.sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield chromium
            chromium.close()
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


# Answers a test provokes on purpose: a refused form or a forbidden page. A 404 (such as a
# missing /favicon.ico) or a server error is a defect.
DELIBERATE = (400, 403, 409)


@pytest.fixture
def open_page(browser, live_server, monkeypatch, caplog):
    """A fresh browser context signed in as `username` (through the password form, or with
    `token=True` through the access-token form as `osmo standalone`'s user does). Afterwards:
    no console error, no failed answer and no "Not Found" in the server's log."""
    from dashboard import views

    monkeypatch.setattr(views, "REFRESH_SECONDS", 1)  # live figures, quickly
    contexts = []
    problems: list[str] = []

    def watch(page) -> None:
        page.on("pageerror", lambda error: problems.append(f"script error: {error}"))
        page.on("console", lambda message: message.type == "error" and not any(
            f"status of {status}" in message.text for status in DELIBERATE)
            and problems.append(f"console: {message.text}"))
        page.on("response", lambda response: response.status >= 400
                and response.status not in DELIBERATE
                and problems.append(f"{response.status} {response.url}"))

    def open_as(username: str, *groups: str, javascript: bool = True, width: int = 1280,
                token: bool = False):
        user = accounts.user_ensure(username=username, groups=list(groups))
        user.set_password(PASSWORD)
        user.save()
        context = browser.new_context(viewport={"width": width, "height": 900},
                                      java_script_enabled=javascript)
        contexts.append(context)
        page = context.new_page()
        watch(page)
        page.set_default_timeout(15_000)
        page.goto(f"{live_server.url}/pools/team/")  # redirected to the login page
        expect(page).to_have_url(f"{live_server.url}/login/?next=/pools/team/")
        if token:
            page.get_by_role("textbox", name="Access token").fill(
                accounts.token_issue(user=user))
            page.get_by_role("button", name="Sign in with this token").click()
        else:
            page.get_by_label("Username").fill(username)
            page.get_by_label("Password", exact=True).fill(PASSWORD)
            page.get_by_role("button", name="Sign in", exact=True).click()
        expect(page).to_have_url(f"{live_server.url}/pools/team/")
        return page

    yield open_as
    for context in contexts:
        context.close()
    problems += [record.getMessage() for record in caplog.records
                 if record.name == "django.request" and "Not Found" in record.getMessage()]
    assert not problems, problems


def screenshot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def cells(page, pool: str) -> list[str]:
    """What a sighted reader sees in a pool's row (screen-reader-only text left out)."""
    return page.locator(f'tr[data-pool="{pool}"]').locator("th, td").evaluate_all(
        """cells => cells.map(cell => {
            const copy = cell.cloneNode(true);
            copy.querySelectorAll(".sr-only").forEach(hidden => hidden.remove());
            return copy.textContent.replace(/\\s+/g, " ").trim();
        })""")


def broken_words(page, selector: str) -> list[str]:
    """Words inside the matched elements that the layout splits over two lines."""
    return page.locator(selector).evaluate_all("""elements => elements.flatMap(element => {
        const broken = [];
        const walker = document.createTreeWalker(element, NodeFilter.SHOW_TEXT);
        while (walker.nextNode()) {
            const node = walker.currentNode;
            for (const match of node.textContent.matchAll(/\\S+/g)) {
                const range = document.createRange();
                range.setStart(node, match.index);
                range.setEnd(node, match.index + match[0].length);
                const lines = new Set(Array.from(range.getClientRects(),
                                                 rect => Math.round(rect.top)));
                if (lines.size > 1) broken.push(match[0]);
            }
        }
        return broken;
    })""")


@pytest.fixture
def seed_team():
    team = factories.pool("team", 100, description="Seed 002's example pool")
    subpools = {name: factories.subpool(team, name, gpus)
                for name, gpus in (("a", 30), ("b", 40), ("c", 20))}
    factories.running_workflow(team, 50, "NORMAL")
    factories.running_workflow(team, 8, "LOW")
    factories.running_workflow(subpools["a"], 5, "HIGH")
    factories.running_workflow(subpools["b"], 10, "NORMAL")
    factories.running_workflow(subpools["b"], 3, "LOW")
    return team


def test_seed_002_tree_and_live_figures(open_page, live_server, seed_team):
    page = open_page("viewer", "osmo-team-user")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Pools").click()
    expect(page.get_by_role("heading", name="Pools", level=1)).to_be_visible()
    assert cells(page, "team")[:5] == ["team", "10 (Total: 100)", "50", "8", "▼ -40"]
    assert cells(page, "team--a")[:5] == ["├─ team--a ACTIVE", "30", "5", "0", "25"]
    assert cells(page, "team--b")[:5] == ["├─ team--b ACTIVE", "40", "10", "3", "30"]
    assert cells(page, "team--c")[:5] == ["└─ team--c ACTIVE", "20", "0", "0", "20"]
    negative = page.locator('tr[data-pool="team"] td.available strong.negative')
    assert negative.evaluate("e => getComputedStyle(e).color") == "rgb(164, 22, 26)"
    expect(page.get_by_role("img", name="Quota split of team: a 30 GPUs, b 40 GPUs, "
                                        "c 20 GPUs, unallocated 10 GPUs")).to_be_visible()
    screenshot(page, "pool-tree")

    # Live: new usage shows up without a reload.
    factories.running_workflow(Pool.objects.get(name="team--c"), 7, "NORMAL")
    expect(page.locator('tr[data-pool="team--c"] td.used')).to_have_text("7", timeout=15_000)
    expect(page.locator('tr[data-pool="team--c"] td.available')).to_have_text("13")
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1

    phone = open_page("viewer-phone", "osmo-team-user", width=390)
    phone.goto(f"{live_server.url}/")
    screenshot(phone, "pool-tree-phone")
    # Only wide tables scroll, inside their own wrapper; the page itself fits the phone.
    assert phone.evaluate("document.documentElement.scrollWidth") <= 390


def test_admin_creates_and_deletes_a_subpool_without_javascript(open_page, live_server,
                                                                  seed_team):
    page = open_page("team-admin", "osmo-team-admin", javascript=False)
    page.get_by_label("Subpool name").fill("d")
    page.get_by_label("Quota (GPUs)").fill("5")
    page.get_by_role("button", name="Create subpool").click()
    expect(page.get_by_role("status")).to_have_text("Subpool team--d created with 5 GPUs.")
    assert cells(page, "team--d")[:5] == ["└─ team--d ACTIVE", "5", "0", "0", "5"]
    assert cells(page, "team")[1] == "5 (Total: 100)"
    screenshot(page, "admin-created")

    # A refused change shows the service's message on the field.
    page.get_by_label("Subpool name").fill("e")
    page.get_by_label("Quota (GPUs)").fill("50")
    page.get_by_role("button", name="Create subpool").click()
    quota = page.get_by_label("Quota (GPUs)")
    expect(quota).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#id_quota_gpus-errors")).to_have_text(
        "Pool 'team' has 100 GPUs, 95 of them already in ACTIVE subpools: 5 unallocated, "
        "50 requested.")
    screenshot(page, "admin-create-refused")
    assert not Pool.objects.filter(name="team--e").exists()

    page.goto(f"{live_server.url}/pools/team/")
    page.get_by_role("link", name="Delete team--d").click()
    expect(page.get_by_role("heading", name="Delete subpool team--d?")).to_be_visible()
    page.get_by_role("button", name="Delete team--d").click()
    expect(page.get_by_role("status")).to_have_text("Subpool team--d is ARCHIVED.")
    assert Pool.objects.get(name="team--d").subpool_state == SubpoolState.ARCHIVED
    expect(page.locator('tr[data-pool="team--d"]')).to_have_count(0)
    archived = page.locator("details#archived-team")
    expect(archived.locator("summary")).to_have_text("1 archived subpool")
    archived.locator("summary").click()
    expect(archived.get_by_role("link", name="team--d")).to_be_visible()
    assert cells(page, "team")[1] == "10 (Total: 100)"
    screenshot(page, "admin-deleted")


def test_admin_drains_a_busy_subpool(open_page, live_server, seed_team):
    page = open_page("team-admin", "osmo-team-admin")
    page.get_by_role("link", name="Delete team--b").click()
    expect(page.get_by_text("2 running workflows hold 13 GPUs")).to_be_visible()
    page.get_by_role("button", name="Delete team--b").click()
    expect(page.get_by_role("status")).to_contain_text("Subpool team--b is DELETING")
    assert cells(page, "team--b")[:5] == [
        "├─ team--b DELETING Draining: 2 running workflows, 13 GPUs held", "0 (was 40)",
        "10", "3", "▼ -10"]
    screenshot(page, "admin-draining")


def test_user_sees_no_admin_controls(open_page, live_server, seed_team):
    page = open_page("team-user", "osmo-team-user")
    for name in ("Add subpool", "Change quota", "Delete", "Create subpool"):
        expect(page.get_by_role("link", name=name)).to_have_count(0)
        expect(page.get_by_role("button", name=name)).to_have_count(0)
    expect(page.locator("form[action*='/subpools/']")).to_have_count(0)
    expect(page.get_by_role("heading", name="History")).to_be_visible()
    screenshot(page, "user-pool-page")
    response = page.goto(f"{live_server.url}/pools/team/subpools/new/")
    assert response.status == 403
    expect(page.get_by_role("heading", name="Not allowed")).to_be_visible()
    page.goto(f"{live_server.url}/cluster/")
    expect(page.get_by_text("No nodes registered.")).to_be_visible()
    screenshot(page, "cluster-empty")
