"""Σ ACTIVE subpool quotas ≤ parent quota under concurrency: real connections, one per thread."""

from __future__ import annotations

import random

import pytest
from django.db.models import Sum

from osmo.errors import OsmoError
from pools import services
from pools.models import Pool, PoolEvent
from tests import factories
from tests.races import all_together

THREADS = 12
ROUNDS = 15


def _race(worker) -> list[tuple[str, bool]]:
    """THREADS threads at once, each running ROUNDS rounds of ``worker``; every outcome."""
    def rounds(index: int) -> list[tuple[str, bool]]:
        rng = random.Random(index)
        return [worker(index, round_, rng) for round_ in range(ROUNDS)]

    return [outcome for outcomes in all_together([lambda i=i: rounds(i)
                                                  for i in range(THREADS)])
            for outcome in outcomes]


def _active_sum(parent: Pool) -> int:
    return Pool.objects.filter(parent=parent, subpool_state="ACTIVE").aggregate(
        s=Sum("quota_gpus"))["s"] or 0


@pytest.mark.django_db(transaction=True)
def test_concurrent_creates_growth_and_parent_shrink_keep_the_invariant():
    parent = factories.pool("team", 100)
    events_before_id = PoolEvent.objects.order_by("-pk").values_list("pk", flat=True)[0]

    def worker(index: int, round_: int, rng: random.Random) -> tuple[str, bool]:
        action = rng.choice(["create", "grow", "grow", "shrink_parent", "delete"])
        try:
            current = Pool.objects.get(pk=parent.pk)
            if action == "create":
                services.subpool_create(actor=None, parent=current,
                                        subpool_name=f"s{index}-{round_}",
                                        quota_gpus=rng.randint(1, 15))
            elif action == "grow":
                subpools = list(Pool.objects.filter(parent=parent, subpool_state="ACTIVE"))
                if not subpools:
                    return action, False
                target = rng.choice(subpools)
                services.subpool_update(actor=None, subpool=target,
                                        quota_gpus=target.quota_gpus + rng.randint(1, 10))
            elif action == "shrink_parent":
                services.pool_upsert(actor=None, name="team",
                                     quota_gpus=max(0, current.quota_gpus - rng.randint(0, 8)))
            else:
                subpools = list(Pool.objects.filter(parent=parent, subpool_state="ACTIVE"))
                if not subpools:
                    return action, False
                services.subpool_delete(actor=None, subpool=rng.choice(subpools))
            return action, True
        except OsmoError as exc:
            assert exc.code in {"quota_exceeds_parent", "subpool_not_active"}, exc.code
            return action, False

    outcomes = _race(worker)
    parent.refresh_from_db()
    assert _active_sum(parent) <= parent.quota_gpus
    assert_partition_matches(parent)
    succeeded = [a for a, ok in outcomes if ok]
    assert any(a == "create" for a in succeeded) and any(a == "grow" for a in succeeded)
    assert any(not ok for _, ok in outcomes)  # the race really hit the limit
    # The audit trail was written in the same transactions: each pool's newest event shows
    # exactly its current state, and every created subpool has one creation event.
    events = PoolEvent.objects.filter(pk__gt=events_before_id)
    for pool in Pool.objects.filter(parent=parent):
        assert events.filter(pool=pool).order_by("-pk").first().after == (
            services.pool_snapshot(pool))
    assert events.filter(action="subpool_created").count() == succeeded.count("create")
    assert events.filter(action="subpool_created").count() == (
        Pool.objects.filter(parent=parent).count())
    newest_parent_event = events.filter(pool=parent).order_by("-pk").first()
    if newest_parent_event is not None:
        assert newest_parent_event.after == services.pool_snapshot(parent)


@pytest.mark.django_db(transaction=True)
def test_concurrent_creates_of_one_name_make_one_subpool():
    parent = factories.pool("team", 1000)

    def worker(index: int, round_: int, rng: random.Random) -> tuple[str, bool]:
        try:
            services.subpool_create(actor=None, parent=Pool.objects.get(pk=parent.pk),
                                    subpool_name=f"same{round_}", quota_gpus=1)
            return "create", True
        except OsmoError as exc:
            assert exc.code == "subpool_exists"
            return "create", False

    outcomes = _race(worker)
    assert sum(ok for _, ok in outcomes) == ROUNDS
    assert Pool.objects.filter(parent=parent).count() == ROUNDS
    assert_partition_matches(parent)


def assert_partition_matches(parent: Pool) -> None:
    """The parent row's kept figures equal what its subpool rows say."""
    parent.refresh_from_db()
    active = Pool.objects.filter(parent=parent, subpool_state="ACTIVE")
    assert (parent.allocated_gpus, parent.active_subpools) == (_active_sum(parent),
                                                               active.count())
