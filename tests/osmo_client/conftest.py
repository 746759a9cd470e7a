from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from osmo.accounts import services as accounts

from .replay import OsmoClient


@pytest.fixture
def osmo_as(db):
    """`osmo login URL --method token --token PAT` as a user with these groups."""

    def login(username: str, *groups: str, superuser: bool = False) -> OsmoClient:
        user = accounts.user_ensure(username=username, superuser=superuser, groups=list(groups))
        return OsmoClient(APIClient(), accounts.token_issue(user=user))

    return login


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """The transcript check compares what the other replays sent: it runs after them."""
    last = [item for item in items
            if getattr(getattr(item, "module", None), "__name__", "").endswith("test_transcripts")]
    items[:] = [item for item in items if item not in last] + last
