"""The README's first five minutes in a real headless Chromium, at desktop and phone (375 px)
widths: the demo's pools and racks, `hello` (8 GPUs) running in team--a and team--b, a `hello`
asking more memory than a node has, that waits. Screenshots go to test-artifacts/dashboard/."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from osmo.accounts import services as accounts
from pools import services as pool_services
from scheduler.backends.embedded import cycle as embedded_cycle
from scheduler.backends.embedded.demo import seed_demo
from tests.dashboard.test_browser import (  # noqa: F401 - fixtures
    broken_words,
    browser,
    expect,
    open_page,
    pytestmark,
    screenshot,
)
from workflows import admission

HELLO = """\
workflow:
  name: hello
  tasks:
  - {name: main, image: ubuntu, command: [sleep, "30"], resource: gpu}
  resources:
    gpu: {gpu: GPUS, cpu: 4, memory: 32Gi}
"""
READABLE = re.compile(r"\d{1,2} [A-Z][a-z]{2} \d{4}, \d\d:\d\d:\d\d UTC")
ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")


@pytest.fixture
def demo():
    """`osmo standalone --demo`, a usage sample taken before anything ran (samples come once a
    minute), then the README's submissions and a scheduling cycle."""
    seed_demo()
    pool_services.usage_samples_record(now=timezone.now() - timedelta(minutes=1),
                                       retention_hours=48)
    admin = accounts.user_ensure(username="admin", groups=["osmo-admin"])
    for pool, gpus, memory in (("team--a", 8, "32Gi"), ("team--b", 8, "32Gi"),
                               ("team--a", 8, "3Ti")):  # more memory than a node has: waits
        admission.workflow_submit(actor=admin, pool=pool, source=HELLO.replace(
            "GPUS", str(gpus)).replace("32Gi", memory))
    embedded_cycle.cycle_run()


def test_the_sign_in_form_the_readme_names(browser, live_server, db):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(f"{live_server.url}/login/")
    headings = page.get_by_role("heading", level=2)
    expect(headings).to_have_text(["Sign in with an access token", "Or sign in with a password"])
    help_text = page.locator("#token-token-help")
    expect(help_text).to_have_text("The token osmo standalone printed, or one from osmo token "
                                   "create or manage.py issue_token.")
    expect(help_text.locator("code")).to_have_count(3)
    assert "`" not in page.locator("main").inner_text()
    response = page.request.get(f"{live_server.url}/favicon.ico")
    assert (response.status, response.headers["content-type"]) == (200, "image/x-icon")
    screenshot(page, "login")
    context.close()


@pytest.mark.parametrize("width", [1280, 375])
def test_the_cluster_page_shows_the_use_now_and_tells_racks_apart(open_page, live_server, demo,
                                                                  width):
    page = open_page("admin", "osmo-admin", token=True, width=width)
    page.goto(f"{live_server.url}/cluster/")
    suffix = "" if width > 1000 else "-phone"

    # The one sample predates the runs; the chart still draws the 16 GPUs in use now.
    team = page.locator('figure.usage-chart[data-pool="team"]')
    expect(team.locator("figcaption")).to_have_text(
        "team · now 16 GPUs used · peak 16 GPUs · quota 100")
    used = team.locator("path.area-used")
    assert used.evaluate("path => path.getBBox().height") == pytest.approx(16 / 100 * 120, abs=.1)
    assert used.evaluate("path => path.getBoundingClientRect().height") > 15  # on screen
    expect(team.locator(".chart-scale")).to_have_text("100 GPUs")
    idle = page.locator('figure.usage-chart[data-pool="inference"] path.area-used')
    assert idle.evaluate("path => path.getBBox().height") == 0

    # Racks are named by what tells them apart, in full; the link still says the whole name.
    for zone in page.locator(".heat-zone").all():
        labels = zone.locator("a.rack-name")
        expect(labels).to_have_text(["rack-0", "rack-1", "rack-2", "rack-3"])
        assert labels.evaluate_all("links => links.every(a => a.scrollWidth <= a.clientWidth)")
    expect(page.get_by_role("link", name="Rack zone-1-rack-2", exact=True)).to_be_visible()

    # The waiting gang is told what could help only; moments read as words.
    expect(page.locator('li[data-podgroup="hello-3-main-group"] .reasons')).to_have_text(
        "insufficient_memory pods of gang 'hello-3-main-group' need 8 GPUs, 4 CPU cores, "
        "3072 GiB memory each, and no node with the labels nvidia.com/gpu.product=H100 has "
        "3072 GiB memory (the largest has 2048 GiB memory), so they cannot start on this "
        "cluster")
    cycle = page.locator("p.updated time").first
    assert READABLE.fullmatch(cycle.inner_text())
    assert ISO.match(cycle.get_attribute("datetime")) and cycle.get_attribute("title")
    assert not ISO.search(page.locator("main").inner_text())
    screenshot(page, f"newcomer-cluster{suffix}")


def test_pool_tables_fit_a_phone_and_history_reads_as_words(open_page, live_server, demo):
    phone = open_page("admin", "osmo-admin", token=True, width=375)
    for path in ("/", "/pools/research/"):
        phone.goto(f"{live_server.url}{path}")
        tables = phone.locator("table.tree")
        assert tables.count() >= 1
        # Nothing to swipe to: every column of every pool table is on screen, headers whole.
        assert tables.evaluate_all("""tables => tables.every(table => {
            const wrap = table.parentElement;
            return wrap.scrollWidth <= wrap.clientWidth;
        })""")
        hidden_headers = phone.locator("table.tree thead th").evaluate_all("""cells => cells
            .filter(cell => getComputedStyle(cell).display !== "none")
            .filter(cell => {
                cell.scrollIntoView({block: "center"});
                const box = cell.getBoundingClientRect();
                const wrap = cell.closest(".table-wrap").getBoundingClientRect();
                const hit = document.elementFromPoint(box.x + box.width / 2,
                                                      box.y + box.height / 2);
                return box.right > wrap.right + .5 || !cell.contains(hit);
            }).map(cell => cell.textContent)""")
        assert hidden_headers == []
        assert broken_words(phone, "table.tree thead th, table.tree tbody th") == []
        expect(phone.get_by_role("columnheader", name="GPU quota").first).to_be_visible()
        screenshot(phone, "newcomer-pools-phone" if path == "/" else "newcomer-research-phone")
    assert phone.evaluate("document.documentElement.scrollWidth") <= 375

    page = open_page("admin-desktop", "osmo-admin", token=True)
    page.goto(f"{live_server.url}/pools/team/")
    history = page.locator("table.history")
    expect(history.locator('td[data-action="pool_created"]')).to_have_text("Pool created")
    created = history.locator("tr", has=page.locator('td[data-action="pool_created"]'))
    expect(created.locator("td").last).to_have_text(
        "quota 100 GPUs; limit none; status ONLINE; priority 100; over-quota weight 1; "
        "platforms dgx-h100; default platform dgx-h100; description “Demo pool team”; "
        "backends default")
    assert "{" not in history.inner_text()
    for moment in history.locator("time").all():
        assert READABLE.fullmatch(moment.inner_text())
        assert ISO.match(moment.get_attribute("datetime"))
    screenshot(page, "newcomer-pool-history")


def test_a_table_wider_than_a_phone_says_it_scrolls(open_page, live_server, demo):
    phone = open_page("admin", "osmo-admin", token=True, width=375)
    phone.goto(f"{live_server.url}/cluster/?tables=on")
    wraps = phone.locator(".table-wrap")
    assert wraps.count() >= 2
    wide = wraps.evaluate_all("""wraps => wraps.map(wrap => [
        wrap.scrollWidth > wrap.clientWidth + 1, wrap.classList.contains("overflows")])""")
    assert [w for w in wide if w[0]] and all(overflows == cut for cut, overflows in wide), wide
    first = phone.locator(".table-wrap.overflows").first
    hint = phone.locator(".table-wrap.overflows").first.locator(
        "xpath=preceding-sibling::*[1]")
    expect(hint).to_have_class("scroll-hint")
    expect(hint).to_be_visible()
    expect(hint).to_have_text("scroll →")
    assert "linear-gradient" in first.evaluate("wrap => getComputedStyle(wrap).maskImage")
    screenshot(phone, "newcomer-cluster-tables-phone")
    first.evaluate("wrap => { wrap.scrollLeft = wrap.scrollWidth; }")
    expect(first).to_have_class(re.compile(r"\bat-end\b"))  # the end: no more fade
    assert first.evaluate("wrap => getComputedStyle(wrap).maskImage") == "none"

    desktop = open_page("admin-desktop", "osmo-admin", token=True, width=1280)
    desktop.goto(f"{live_server.url}/cluster/?tables=on")
    expect(desktop.locator(".table-wrap").first).to_be_visible()
    assert desktop.locator(".table-wrap.overflows").count() == 0
    expect(desktop.locator(".scroll-hint:visible")).to_have_count(0)
