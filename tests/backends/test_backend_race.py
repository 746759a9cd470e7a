"""Concurrent creates of one backend name: one creates it, the others update that row."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from scheduler.backends import services
from scheduler.models import Backend

THREADS = 8


@pytest.mark.django_db(transaction=True)
def test_concurrent_creates_of_one_name_make_one_row():
    barrier = threading.Barrier(THREADS)
    created: list[bool] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait()
            _, was_created = services.backend_upsert(name="east", kind="kubernetes")
            created.append(was_created)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert sorted(created) == [False] * (THREADS - 1) + [True]
    assert Backend.objects.filter(name="east").count() == 1
