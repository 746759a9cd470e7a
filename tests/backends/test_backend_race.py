"""Concurrent creates of one backend name: one creates it, the others update that row."""

from __future__ import annotations

import pytest

from scheduler.backends import services
from scheduler.models import Backend
from tests.races import all_together

THREADS = 8


@pytest.mark.django_db(transaction=True)
def test_concurrent_creates_of_one_name_make_one_row():
    created = all_together([lambda: services.backend_upsert(name="east", kind="kubernetes")[1]
                            for _ in range(THREADS)])
    assert sorted(created) == [False] * (THREADS - 1) + [True]
    assert Backend.objects.filter(name="east").count() == 1
