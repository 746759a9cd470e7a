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
