"""Fair share arithmetic (SCHEDULING.md step 2): hand-computed cases and properties."""

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.fair_share import Claimant, fair_shares, split
from tests.unit.scheduler_core.builders import queue


def claim(name, requested, quota=0, weight=1, limit=-1, priority=100, usage=0.0):
    return Claimant(name, priority, quota, limit, weight, requested, usage)


def test_spec_vector_70_30():
    shares = split(100, [claim("q1", 100, quota=10, weight=3), claim("q2", 100, quota=10)])
    assert shares == {"q1": 70, "q2": 30}


def test_requests_below_quota_get_what_they_ask():
    assert split(100, [claim("q1", 5, quota=10), claim("q2", 8, quota=10)]) == {"q1": 5, "q2": 8}


def test_limit_caps_share_and_returns_rest_to_others():
    shares = split(100, [claim("q1", 100, quota=10, weight=3, limit=20),
                         claim("q2", 100, quota=10)])
    assert shares == {"q1": 20, "q2": 80}


def test_limit_below_quota_wins():
    assert split(100, [claim("q1", 100, quota=50, limit=20), claim("q2", 100)]) == {
        "q1": 20, "q2": 80}


def test_higher_priority_bucket_takes_over_quota_first():
    assert split(100, [claim("hi", 50, priority=200), claim("lo", 100)]) == {"hi": 50, "lo": 50}
    assert split(100, [claim("hi", 100, priority=200), claim("lo", 100)]) == {"hi": 100, "lo": 0}


def test_quota_comes_before_priority():
    shares = split(100, [claim("hi", 100, priority=200), claim("lo", 100, quota=20)])
    assert shares == {"hi": 80, "lo": 20}


def test_zero_weight_gets_only_quota():
    shares = split(100, [claim("q1", 100, quota=10, weight=0), claim("q2", 100, quota=10)])
    assert shares == {"q1": 10, "q2": 90}


def test_leftover_units_by_name_when_remainders_tie():
    shares = split(10, [claim("a", 10), claim("b", 10), claim("c", 10)])
    assert shares == {"a": 4, "b": 3, "c": 3}


def test_leftover_unit_goes_to_largest_remainder():
    assert split(10, [claim("a", 10, weight=1), claim("b", 10, weight=2)]) == {"a": 3, "b": 7}


def test_water_filling_redistributes_what_a_small_request_cannot_use():
    shares = split(100, [claim("a", 10), claim("b", 100), claim("c", 100, weight=2)])
    assert shares == {"a": 10, "b": 30, "c": 60}


def test_oversubscribed_quotas_keep_deserved_unscaled():
    """KAI's resource division: deserved = quota even when the quotas exceed the cluster."""
    assert split(10, [claim("q1", 10, quota=10), claim("q2", 10, quota=10)]) == {
        "q1": 10, "q2": 10}
    assert split(10, [claim("hi", 10, quota=8, priority=200), claim("lo", 10, quota=8)]) == {
        "hi": 8, "lo": 8}
    assert split(8, [claim("q0", 8, quota=6, weight=6), claim("q1", 5, quota=5, weight=5)]) == {
        "q0": 6, "q1": 5}
    assert split(2, [claim("lone", 4, quota=4)]) == {"lone": 4}


def test_lone_queue_keeps_its_deserved_above_the_cluster():
    """KAI resource_division_test.go, SetResourcesShare "one queue", "Not enough resources -
    should gets all cluster": GPU deserved 2 asking 3 on 1 GPU -> 2 (deserved kept); CPU
    deserved 20000 asking 2500 on 1000 -> 2500 (its request); memory deserved 1000 asking
    5000 on 3000 -> 3000 (deserved, then the rest of the cluster over quota)."""
    assert split(1, [claim("1", 3, quota=2)]) == {"1": 2}
    assert split(1000, [claim("1", 2500, quota=20000)]) == {"1": 2500}
    assert split(3000, [claim("1", 5000, quota=1000)]) == {"1": 3000}


def test_usage_lowers_the_over_quota_share():
    """KAI time-based fair share (resource_division.go calcShareWeights): weight
    max(0, w + k(w - usage)), w normalized over the siblings still asking. 100 GPUs, both
    quota 10 weight 1 asking 100, q1 used half the cluster, q2 nothing: the 80 over quota go
    0.5 : 1.0 -> 26.67 / 53.33, the lost unit to the larger remainder -> 37 / 63."""
    shares = split(100, [claim("q1", 100, quota=10, usage=0.5), claim("q2", 100, quota=10)])
    assert shares == {"q1": 37, "q2": 63}
    assert split(100, [claim("q1", 100, quota=10, usage=0.5), claim("q2", 100, quota=10)],
                 k_value=0) == {"q1": 50, "q2": 50}


def test_usage_above_its_weight_twice_over_gets_nothing_over_quota():
    """w = 0.5, usage 1.0, k 1: 0.5 + (0.5 - 1.0) = 0 -> only the deserved part."""
    shares = split(100, [claim("q1", 100, quota=10, usage=1.0), claim("q2", 100, quota=10)])
    assert shares == {"q1": 10, "q2": 90}


def test_equal_usage_favours_the_heavier_weight_as_kai():
    """KAI's formula is not scale-free: w 0.75 / 0.25 with usage 0.2 each -> 1.3 / 0.3, so the
    80 over quota split 65 / 15."""
    plain = split(100, [claim("q1", 100, quota=10, weight=3), claim("q2", 100, quota=10)])
    used = split(100, [claim("q1", 100, quota=10, weight=3, usage=0.2),
                       claim("q2", 100, quota=10, usage=0.2)])
    assert plain == {"q1": 70, "q2": 30}
    assert used == {"q1": 75, "q2": 25}


def test_unlimited_quota_means_requested():
    """Quota -1 (KAI: unlimited) deserves everything it asks for, before any weights."""
    assert split(100, [claim("q1", 30, quota=-1), claim("q2", 100, quota=10)]) == {
        "q1": 30, "q2": 70}


def test_nothing_requested_gets_nothing():
    assert split(100, [claim("idle", 0, quota=50), claim("busy", 100)]) == {"idle": 0, "busy": 100}


def test_hierarchical_top_down():
    queues = [queue("root"), queue("dept1", "root", quota=40), queue("dept2", "root", quota=20),
              queue("t1", "dept1", quota=30), queue("t2", "dept1"), queue("t3", "dept2", quota=20)]
    requested = {"t1": {"gpu": 100}, "t2": {"gpu": 10}, "t3": {"gpu": 100}}
    shares = fair_shares(queues, {"gpu": 100, "cpu": 0, "memory": 0}, requested)
    assert {name: shares[name]["gpu"] for name in shares} == {
        "root": 100, "dept1": 60, "dept2": 40, "t1": 50, "t2": 10, "t3": 40}


def test_parent_limit_caps_children():
    queues = [queue("pool", limit=16), queue("a", "pool", quota=0, weight=3),
              queue("b", "pool", quota=0)]
    requested = {"a": {"gpu": 100}, "b": {"gpu": 100}}
    shares = fair_shares(queues, {"gpu": 100}, requested)
    assert (shares["pool"]["gpu"], shares["a"]["gpu"], shares["b"]["gpu"]) == (16, 12, 4)


claimants = st.lists(
    st.builds(lambda i, req, quota, weight, limit, prio: claim(f"q{i}", req, quota, weight,
                                                                limit, prio),
              st.integers(0, 0), st.integers(0, 60), st.integers(-1, 30), st.integers(0, 4),
              st.integers(-1, 50), st.sampled_from([50, 100, 200])),
    min_size=1, max_size=6).map(lambda items: [
        Claimant(f"q{i}", c.priority, c.quota, c.limit, c.weight, c.requested)
        for i, c in enumerate(items)])


@settings(max_examples=300, deadline=None)
@given(claimants, st.integers(0, 200))
def test_split_properties(items, amount):
    shares = split(amount, items)
    guaranteed = [item.cap if item.quota == -1 else min(item.quota, item.cap) for item in items]
    deserved = [min(item.cap, amount) if item.quota == -1 else min(item.quota, item.cap)
                for item in items]
    assert sum(shares.values()) <= max(amount, sum(deserved))
    for item in items:
        assert 0 <= shares[item.name] <= max(min(item.cap, amount), min(item.quota, item.cap))
    if sum(guaranteed) <= amount:
        for item, floor in zip(items, guaranteed, strict=True):
            assert shares[item.name] >= floor
    if all(item.weight > 0 for item in items) and sum(item.cap for item in items) >= amount:
        assert sum(shares.values()) == max(amount, sum(deserved))
    if all(item.weight > 0 for item in items) and sum(item.cap for item in items) <= amount:
        assert all(shares[item.name] == item.cap for item in items)
    shuffled = list(items)
    random.Random(amount).shuffle(shuffled)
    assert split(amount, shuffled) == shares
