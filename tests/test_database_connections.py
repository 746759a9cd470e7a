"""A persistent connection's per-request health check: no round trip while it is healthy, and
a connection the server ended is closed before the request uses it."""

from __future__ import annotations

import time

import pytest
from django.db import connection


def _new_request() -> None:
    connection.close_if_unusable_or_obsolete()  # what Django does as a request starts
    connection.close_if_health_check_failed()   # what its first query does


def _last_query(observer, pid: int) -> str | None:
    row = observer.execute("SELECT query FROM pg_stat_activity WHERE pid = %s",
                           [pid]).fetchone()
    return row[0] if row else None


@pytest.mark.django_db(transaction=True)
def test_a_healthy_connection_is_checked_without_a_round_trip_and_an_ended_one_replaced():
    assert connection.health_check_enabled
    observer = connection.get_new_connection(connection.get_connection_params())
    observer.autocommit = True
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 'before the next request'")
        pid = connection.connection.info.backend_pid
        _new_request()
        assert connection.connection is not None and connection.health_check_done
        assert _last_query(observer, pid) == "SELECT 'before the next request'"  # no SELECT 1

        observer.execute("SELECT pg_terminate_backend(%s)", [pid])
        deadline = time.monotonic() + 10
        while _last_query(observer, pid) is not None:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        _new_request()
        assert connection.connection is None  # closed before any statement of the request
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            assert cursor.fetchone()[0] != pid
    finally:
        observer.close()



@pytest.mark.django_db
def test_an_integer_beyond_its_column_is_refused_and_equals_no_row():
    """Bound on the server, an integer field's value is written in its column's binary form,
    where a larger number would be truncated (2**32 + 5 as 5): such a value is refused as the
    server refuses one out of range — a ``DataError``, the contract's 400 — writes nothing and
    equals no row."""
    from django.db import DataError, transaction

    from workflows.models import WorkflowNameCounter

    WorkflowNameCounter.objects.create(spec_name="five", value=5)
    for number in (2**32 + 5, 2**40, 2**63 + 5, 10**30):
        assert not WorkflowNameCounter.objects.filter(value=number).exists()
        with pytest.raises(DataError, match="out of range"), transaction.atomic():
            WorkflowNameCounter.objects.create(spec_name="big", value=number)
        with pytest.raises(DataError, match="out of range"), transaction.atomic():
            WorkflowNameCounter.objects.filter(spec_name="five").update(value=number)
    assert list(WorkflowNameCounter.objects.values_list("spec_name", "value")) == [("five", 5)]
