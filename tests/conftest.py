from __future__ import annotations

import os

import pytest
from rest_framework.test import APIClient

from tests import environment

_servers: dict = {}


def start_database() -> None:
    if not environment.OWN_DATABASE or "postgres" in _servers:
        return
    import psycopg

    from osmo.embedded import start_postgres

    url = start_postgres(environment.WORK_DIR / "data", cleanup_mode="delete")
    assert url == os.environ["DATABASE_URL"], (url, os.environ["DATABASE_URL"])
    # Durability is not under test: trade it for speed.
    with psycopg.connect(host=str(environment.WORK_DIR / "data" / "pg"), user="postgres",
                         dbname="postgres", autocommit=True) as conn:
        for setting in ("fsync", "synchronous_commit", "full_page_writes"):
            conn.execute(f"ALTER SYSTEM SET {setting} = off")
        conn.execute("SELECT pg_reload_conf()")
    _servers["postgres"] = True


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """Runs before the test database is created: the server has to be up by then."""
    start_database()


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup):
    """pytest-django's, and the workflow numbering connection closed before the test database
    is dropped."""
    yield
    from workflows import numbering

    numbering.close()


@pytest.fixture(scope="session")
def broker_url() -> str:
    """A real Redis-protocol broker for the tests that are about background work."""
    if environment.OWN_BROKER and "broker" not in _servers:
        from osmo.embedded import start_broker

        _servers["broker"] = start_broker(environment.WORK_DIR / "broker",
                                          port=environment.BROKER_PORT)
    return os.environ["REDIS_URL"]


def pytest_sessionfinish(session, exitstatus):
    broker = _servers.pop("broker", None)
    if broker is not None:
        broker.stop()


# --- API clients -----------------------------------------------------------------------------

def make_client(username: str, *groups: str, superuser: bool = False) -> APIClient:
    from osmo.accounts import services

    user = services.user_ensure(username=username, superuser=superuser, groups=list(groups))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {services.token_issue(user=user)}")
    client.user = user
    return client


@pytest.fixture
def admin_client(db):
    return make_client("platform-admin", "osmo-admin")


@pytest.fixture
def client_for(db):
    return make_client
