"""A pool's config revisions in a real headless Chromium: the history lists each revision with
its tags and description, a revision's page shows what changed field by field, and its links
walk the pool's revisions; screenshots go to test-artifacts/dashboard/."""

from __future__ import annotations

from osmo import config_history
from osmo.accounts import services as accounts
from pools import services as pool_services
from pools.models import PoolEvent
from scheduler.configs.services import config_tag
from tests import factories
from tests.dashboard.test_browser import (  # noqa: F401 - fixtures
    browser,
    expect,
    open_page,
    pytestmark,
    screenshot,
)


def revisions_of(pool: str) -> list[int]:
    return list(PoolEvent.objects.filter(pool__name=pool).order_by("revision")
                .values_list("revision", flat=True))


def test_a_pool_s_revisions_show_what_changed_and_link_to_each_other(open_page, live_server):
    admin = accounts.user_ensure(username="root", groups=["osmo-admin"])
    factories.pool("team", 64)
    with config_history.noted(config_history.Note(description="more GPUs for the launch")):
        pool_services.pool_upsert(actor=admin, name="team", quota_gpus=96, max_retries=5)
    created, changed = revisions_of("team")
    config_tag(config_type=config_history.POOL, revision=changed, add=["launch"], remove=[])

    page = open_page("viewer", "osmo-team-user")
    row = page.locator(f'tr[data-revision="{changed}"]')
    expect(row).to_contain_text("launch")
    expect(row).to_contain_text("quota 64 GPUs → 96 GPUs; max retries 3 → 5")
    screenshot(page, "pool-revisions")

    row.get_by_role("link", name=f"Revision {changed}: what changed").click()
    expect(page).to_have_url(f"{live_server.url}/pools/team/revisions/{changed}/")
    expect(page.get_by_role("heading", name=f"Revision {changed} of team",
                            level=1)).to_be_visible()
    fields = page.locator("table.diff tbody tr").evaluate_all(
        "rows => rows.map(row => Array.from(row.children, cell => cell.textContent.trim()))")
    assert fields == [["max_retries", "3", "5"], ["quota_gpus", "64", "96"]]
    expect(page.locator("dl.facts")).to_contain_text("root")
    expect(page.locator("dl.facts")).to_contain_text("more GPUs for the launch")
    screenshot(page, "pool-revision")

    page.get_by_role("link", name=f"← Revision {created}").click()
    expect(page).to_have_url(f"{live_server.url}/pools/team/revisions/{created}/")
    expect(page.locator('table.diff tr[data-field="quota_gpus"] td').nth(1)).to_have_text("64")
    expect(page.get_by_role("link", name=f"Revision {changed} →")).to_be_visible()
