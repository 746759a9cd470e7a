"""Process counts from the machine, and the database connections they hold at once."""

from __future__ import annotations

from osmo import capacity


def test_the_web_workers_asked_for_size_the_database_connections(monkeypatch) -> None:
    monkeypatch.setenv("OSMO_WEB_WORKERS", "6")
    assert capacity.web_workers() == 6
    assert capacity.database_connections() == (6 * (capacity.WEB_THREADS + 1)
                                               + capacity.worker_concurrency() + 30)


def test_from_the_machine_and_never_below_postgresqls_default(monkeypatch) -> None:
    monkeypatch.delenv("OSMO_WEB_WORKERS", raising=False)
    monkeypatch.setattr(capacity, "cpus", lambda: 1)
    assert capacity.web_workers() == 2  # one request that blocks leaves another process
    assert capacity.database_connections() == 2 * 41 + 1 + 30
    for wrong in ("0", "-3", "many", ""):
        monkeypatch.setenv("OSMO_WEB_WORKERS", wrong)
        assert capacity.web_workers() == 2
    monkeypatch.setattr(capacity, "WEB_THREADS", 2)
    assert capacity.database_connections() == 100
