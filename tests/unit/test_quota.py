"""The quota arithmetic of seed 002, property-tested."""

from hypothesis import given
from hypothesis import strategies as st

from pools import quota

states = st.sampled_from([quota.ACTIVE, quota.DELETING, quota.ARCHIVED])
subpools = st.lists(st.tuples(states, st.integers(0, 10_000)), max_size=20)


def test_seed_example():
    children = [("ACTIVE", 30), ("ACTIVE", 40), ("ACTIVE", 20)]
    assert quota.unallocated(100, children) == 10
    assert quota.available(quota.unallocated(100, children), 50) == -40
    assert quota.available(30, 5) == 25


def test_deleting_and_archived_count_as_zero():
    assert quota.effective_quota("DELETING", 30) == 0
    assert quota.effective_quota("ARCHIVED", 30) == 0
    assert quota.unallocated(100, [("DELETING", 30), ("ACTIVE", 20)]) == 80
    assert quota.available(quota.effective_quota("DELETING", 30), 12) == -12


def test_floor_to_whole_gpus():
    assert quota.whole_gpus(2.9) == 2
    assert quota.unallocated(100.7, [("ACTIVE", 30.5)]) == 70
    assert quota.available(10, 2.5) == 8


@given(st.integers(0, 100_000), subpools)
def test_unallocated_plus_active_is_the_parent_quota(parent, children):
    allocated = sum(q for s, q in children if s == quota.ACTIVE)
    assert quota.unallocated(parent, children) + allocated == parent
    assert quota.allocated_to_subpools(children) == allocated


@given(st.integers(0, 100_000), st.integers(0, 100_000))
def test_available_is_quota_minus_used_and_may_be_negative(q, used):
    assert quota.available(q, used) == q - used
    assert (quota.available(q, used) < 0) == (used > q)


@given(st.integers(0, 1000), st.integers(0, 1000), st.integers(0, 1000))
def test_fits_in_parent_matches_the_invariant(parent, others, new):
    assert quota.fits_in_parent(parent, others, new) == (others + new <= parent)


@given(st.floats(0, 1e6, allow_nan=False), st.lists(st.floats(0, 1e4), max_size=5))
def test_usage_figures_are_whole_numbers(parent, quotas):
    children = [(quota.ACTIVE, q) for q in quotas]
    assert isinstance(quota.unallocated(parent, children), int)
    assert quota.unallocated(parent, children) <= parent


@given(st.integers(0, 100_000), subpools)
def test_a_summed_allocation_gives_the_same_unallocated_figure(parent, children):
    allocated = quota.allocated_to_subpools(children)
    assert quota.unallocated(parent, allocated=allocated) == quota.unallocated(parent, children)
