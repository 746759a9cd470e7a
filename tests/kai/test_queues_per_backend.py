"""Each cluster's Queue hierarchy (docs/SCHEDULING.md, "Many clusters"): a cluster gets the
queues of the pools that name it, and each quota as its share there, so that summed over the
clusters every queue's quota is the pool's."""

from __future__ import annotations

import pytest

from pools.models import Pool
from scheduler.kai.selectors import queue_manifests, queues
from scheduler.models import Backend
from tests import factories

pytestmark = pytest.mark.django_db
NS = "osmo"


def quotas(backend: str | None) -> dict[str, int]:
    return {q.full_name: q.queue.gpu.quota for q in queues(namespace=NS, backend=backend)
            if q.pool is not None}


@pytest.fixture
def fleet():
    for name in ("a", "b", "c"):
        Backend.objects.create(name=name, kind="kubernetes")
    team = factories.pool("team", 64)
    Pool.objects.filter(pk=team.pk).update(backends=["a", "b"])
    sub = factories.subpool(Pool.objects.get(pk=team.pk), "s", 16)
    solo = factories.pool("solo", 8)
    Pool.objects.filter(pk=solo.pk).update(backends=["c"])
    return Pool.objects.get(pk=team.pk), sub


def test_each_cluster_gets_its_pools_and_the_quotas_sum_to_the_pools(fleet):
    team, sub = fleet
    # 8 guaranteed GPUs of the subpool dispatched to b, LOW work there counts for nothing.
    factories.running_workflow(sub, 8).groups.update(backend="b")
    factories.running_workflow(sub, 4, "LOW").groups.update(backend="b")
    factories.running_workflow(team, 2, bound=False)  # admitted, not dispatched anywhere
    whole, on_a, on_b, on_c = quotas(None), quotas("a"), quotas("b"), quotas("c")
    container, shared, leaf = (f"osmo-pool-{NS}-team", f"osmo-pool-{NS}-team.shared",
                               f"osmo-pool-{NS}-team--s")
    assert (whole[container], whole[shared], whole[leaf]) == (64, 48, 16)
    assert (on_a[container], on_a[shared], on_a[leaf]) == (56, 48, 8)
    assert (on_b[container], on_b[shared], on_b[leaf]) == (8, 0, 8)
    for name in (container, shared, leaf):
        assert on_a[name] + on_b[name] == whole[name]
    assert set(on_c) == {f"osmo-pool-{NS}-solo", f"osmo-pool-{NS}-solo.shared"}
    assert not set(on_c) & set(on_a) and not set(on_a) & {f"osmo-pool-{NS}-solo"}


def test_a_pool_on_one_cluster_keeps_its_whole_quotas_there(fleet):
    assert {k: v for k, v in quotas("c").items()} == {
        f"osmo-pool-{NS}-solo": 8, f"osmo-pool-{NS}-solo.shared": 8}
    manifests = {m["metadata"]["name"]: m for m in queue_manifests(namespace=NS, backend="c")}
    assert manifests[f"osmo-pool-{NS}-solo"]["spec"]["resources"]["gpu"]["quota"] == 8
