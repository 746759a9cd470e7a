"""Concurrent rollbacks on real connections (one per thread) keep Σ ACTIVE subpool quotas ≤
the parent's quota: a rollback takes the same locks as the update it stands for."""

from __future__ import annotations

import random

import pytest
from django.db.models import OuterRef, Subquery, Sum

from osmo import config_history
from osmo.errors import OsmoError
from pools import services
from pools.models import Pool, PoolEvent
from scheduler.configs.services import config_rollback
from tests import factories
from tests.races import all_together

SUBPOOLS = 10
ROUNDS = 12


def _family(parent: Pool) -> tuple[int, int, int]:
    """(quota, allocated, Σ ACTIVE subpool quotas), read by one statement: one snapshot."""
    active = Pool.objects.filter(parent=OuterRef("name"), subpool_state="ACTIVE").values(
        "parent").annotate(total=Sum("quota_gpus")).values("total")
    quota, allocated, total = Pool.objects.filter(pk=parent.pk).annotate(
        active=Subquery(active)).values_list("quota_gpus", "allocated_gpus", "active").get()
    return quota, allocated, total or 0


@pytest.fixture
def family(transactional_db):
    """Parent of 20 GPUs; each subpool was 8 GPUs once (revision `high[i]`), 0 now."""
    parent = factories.pool("team", 20)
    high = {}
    for i in range(SUBPOOLS):
        subpool = factories.subpool(parent, f"s{i}", 0)
        services.subpool_update(actor=None, subpool=subpool, quota_gpus=8)
        high[i] = PoolEvent.objects.filter(pool=subpool).order_by("-revision")[0].revision
        services.subpool_update(actor=None, subpool=subpool, quota_gpus=0)
    return parent, high


def _rollback(revision: int) -> str:
    try:
        config_rollback(actor=None, config_type=config_history.POOL, revision=revision)
    except OsmoError as error:
        return error.code
    return "ok"


def test_racing_rollbacks_above_the_share_let_exactly_what_fits_through(family):
    parent, high = family
    revisions_before = PoolEvent.objects.count()
    outcomes = all_together([lambda i=i: _rollback(high[i]) for i in range(SUBPOOLS)])
    assert sorted(outcomes) == ["ok"] * 2 + ["quota_exceeds_parent"] * (SUBPOOLS - 2)
    assert _family(parent) == (20, 16, 16)
    # One revision for each rollback that went through, numbered without gaps.
    revisions = list(PoolEvent.objects.order_by("revision").values_list("revision", flat=True))
    assert len(revisions) == revisions_before + 2
    assert revisions == list(range(1, len(revisions) + 1))


def test_rollbacks_mixed_with_updates_and_parent_shrinks_keep_the_invariant(family):
    parent, high = family
    parent_revisions = list(PoolEvent.objects.filter(pool=parent).values_list("revision",
                                                                              flat=True))
    services.pool_upsert(actor=None, name="team", quota_gpus=12)

    def work(index: int) -> list[str]:
        rng = random.Random(index)
        seen = []
        for _ in range(ROUNDS):
            choice = rng.random()
            if choice < 0.6:
                seen.append(_rollback(high[rng.randrange(SUBPOOLS)]))
            elif choice < 0.8:
                seen.append(_rollback(rng.choice(parent_revisions)))  # the parent back to 20
            else:
                subpool = Pool.objects.get(name=f"team--s{rng.randrange(SUBPOOLS)}")
                try:
                    services.subpool_update(actor=None, subpool=subpool, quota_gpus=0)
                    seen.append("ok")
                except OsmoError as error:
                    seen.append(error.code)
            quota, allocated, active = _family(parent)
            assert allocated == active <= quota
        return seen

    outcomes = [code for seen in all_together([lambda i=i: work(i) for i in range(8)])
                for code in seen]
    assert set(outcomes) <= {"ok", "quota_exceeds_parent"}
    assert "ok" in outcomes
    quota, allocated, active = _family(parent)
    assert allocated == active <= quota
    revisions = list(PoolEvent.objects.order_by("revision").values_list("revision", flat=True))
    assert revisions == list(range(1, len(revisions) + 1))
