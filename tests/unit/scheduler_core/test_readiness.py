"""Readiness (KAI IsSubGroupReady + minSubGroup) and the non-preemptible count."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.model import Gang, Pod, SubGroup
from scheduler.core.readiness import (
    InvalidGang,
    build_tree,
    core_counts,
    is_ready,
    minimum_pods,
    natural_key,
    natural_order,
    ready_counts,
)
from tests.unit.scheduler_core.builders import gang, leaf, mid, pods


def gang_ready(gang, is_pod_ready=None):
    tree = build_tree(gang)
    return is_ready(tree, ready_counts(tree, is_pod_ready))


def non_preemptible_pod_count(gang):
    return minimum_pods(build_tree(gang))


def counts_for(tree, per_leaf):
    return [per_leaf.get(node.name, 0) for node in tree.nodes]


def prefill_gang(min_subgroup=3):
    subgroups = [leaf(f"prefill-{i}", 8) for i in range(4)]
    pod_list = [p for i in range(4) for p in pods(f"p{i}", 8, subgroup=f"prefill-{i}")]
    return gang("inference-service", subgroups=subgroups, pod_list=pod_list,
                min_subgroup=min_subgroup)


def two_level_gang():
    subgroups = [mid("decode", 2), leaf("decode-leaders", 1, "decode"),
                 leaf("decode-workers", 4, "decode"), mid("prefill", 2),
                 leaf("prefill-leaders", 1, "prefill"), leaf("prefill-workers", 4, "prefill")]
    pod_list = (pods("dl", 1, subgroup="decode-leaders") + pods("dw", 4, subgroup="decode-workers")
                + pods("pl", 1, subgroup="prefill-leaders")
                + pods("pw", 4, subgroup="prefill-workers"))
    return gang("training-job", subgroups=subgroups, pod_list=pod_list, min_subgroup=2)


def test_leaf_ready_at_min_member():
    tree = build_tree(prefill_gang())
    three = {"prefill-0": 8, "prefill-1": 8, "prefill-2": 8}
    assert is_ready(tree, counts_for(tree, three))
    assert not is_ready(tree, counts_for(tree, {**three, "prefill-2": 7}))


def test_min_subgroup_unset_requires_all_children():
    tree = build_tree(prefill_gang(min_subgroup=None))
    three = {"prefill-0": 8, "prefill-1": 8, "prefill-2": 8}
    assert not is_ready(tree, counts_for(tree, three))
    assert is_ready(tree, counts_for(tree, {**three, "prefill-3": 8}))


def test_two_level_needs_both_components_with_both_roles():
    tree = build_tree(two_level_gang())
    full = {"decode-leaders": 1, "decode-workers": 4, "prefill-leaders": 1, "prefill-workers": 4}
    assert is_ready(tree, counts_for(tree, full))
    assert not is_ready(tree, counts_for(tree, {**full, "prefill-leaders": 0}))


def test_no_subgroups_is_one_implicit_leaf_default_one():
    single = gang("job", pod_list=pods("p", 3))
    assert not gang_ready(single)
    assert gang_ready(single, lambda pod: pod.name == "p-0")
    strict = gang("job", pod_list=pods("p", 3), min_member=3)
    assert not gang_ready(strict, lambda pod: pod.name != "p-2")
    assert gang_ready(strict, lambda pod: True)


def test_root_min_member_beside_subgroups_counts_descendant_pods_and_all_children():
    base = gang("g", subgroups=[leaf("a", 1), leaf("b", 1)],
                pod_list=pods("a", 3, subgroup="a") + pods("b", 3, subgroup="b"), min_member=4)
    tree = build_tree(base)
    assert not is_ready(tree, counts_for(tree, {"a": 1, "b": 1}))
    assert is_ready(tree, counts_for(tree, {"a": 3, "b": 1}))
    assert not is_ready(tree, counts_for(tree, {"a": 3, "b": 0}))


def test_zero_minimums_mean_no_gang_rule():
    tree = build_tree(gang("g", subgroups=[leaf("a", 0)], pod_list=pods("a", 2, subgroup="a"),
                           min_subgroup=0))
    assert is_ready(tree, counts_for(tree, {}))


def test_non_preemptible_count_two_level_seed_000():
    assert non_preemptible_pod_count(two_level_gang()) == 10


def test_non_preemptible_count_min_subgroup_smallest_first():
    subgroups = [leaf("big", 8), leaf("small", 2), leaf("mid", 4)]
    pod_list = (pods("b", 8, subgroup="big") + pods("s", 2, subgroup="small")
                + pods("m", 4, subgroup="mid"))
    assert non_preemptible_pod_count(gang("g", subgroups=subgroups, pod_list=pod_list,
                                          min_subgroup=2)) == 6


def test_non_preemptible_count_root_min_member_and_grove_example():
    grove = [mid("prefill", 3), *[leaf(f"prefill-{i}", 8, "prefill") for i in range(4)],
             mid("decode", 1), *[leaf(f"decode-{i}", 4, "decode") for i in range(2)]]
    assert non_preemptible_pod_count(gang("g", subgroups=grove, min_subgroup=2)) == 28
    inconsistent = gang("g", subgroups=[leaf("decode", 4), leaf("prefill", 1)], min_member=2)
    assert non_preemptible_pod_count(inconsistent) == 5
    generous = gang("g", subgroups=[leaf("decode", 4), leaf("prefill", 1)], min_member=7)
    assert non_preemptible_pod_count(generous) == 7
    assert non_preemptible_pod_count(gang("flat", pod_list=pods("p", 5), min_member=3)) == 3


def test_core_prefers_ready_children_and_leaves_surplus():
    tree = build_tree(prefill_gang())
    counts = counts_for(tree, {"prefill-0": 8, "prefill-1": 3, "prefill-2": 8, "prefill-3": 8})
    core = core_counts(tree, counts)
    assert [core[i] for i in tree.leaves] == [8, 0, 8, 8]


@pytest.mark.parametrize("subgroups, pod_list, message", [
    ([SubGroup("a", min_member=1), SubGroup("a", min_member=1)], [], "defined twice"),
    ([SubGroup("a", parent="x", min_member=1)], [], "does not exist"),
    ([SubGroup("a", parent="b"), SubGroup("b", parent="a")], [], "cycle"),
    ([SubGroup("a", min_subgroup=1), SubGroup("b", parent="a", min_member=1)],
     [Pod("p", subgroup="a")], "leaf subgroups only"),
    ([SubGroup("a", min_member=1)], [Pod("p", subgroup="zzz")], "does not exist"),
])
def test_invalid_trees_are_rejected(subgroups, pod_list, message):
    with pytest.raises(InvalidGang, match=message):
        build_tree(Gang("g", "q", subgroups=tuple(subgroups), pods=tuple(pod_list)))


@st.composite
def trees_and_counts(draw):
    """A random two-level tree with random min_subgroup / min_member and ready counts."""
    subgroups = []
    for m in range(draw(st.integers(1, 3))):
        children = draw(st.integers(1, 3))
        subgroups.append(SubGroup(f"m{m}", min_subgroup=draw(st.one_of(
            st.none(), st.integers(0, children)))))
        for c in range(children):
            subgroups.append(SubGroup(f"m{m}-l{c}", parent=f"m{m}",
                                      min_member=draw(st.integers(0, 4))))
    mids = sum(1 for s in subgroups if s.parent is None)
    g = Gang("g", "q", subgroups=tuple(subgroups),
             min_subgroup=draw(st.one_of(st.none(), st.integers(0, mids))))
    tree = build_tree(g)
    counts = [draw(st.integers(0, 5)) if node.is_leaf else 0 for node in tree.nodes]
    return g, tree, counts


@settings(max_examples=300, deadline=None)
@given(trees_and_counts(), st.data())
def test_readiness_is_monotone_in_ready_pods(case, data):
    _gang, tree, counts = case
    if is_ready(tree, counts):
        more = list(counts)
        leaf_index = data.draw(st.sampled_from(tree.leaves))
        more[leaf_index] += 1
        assert is_ready(tree, more)


@settings(max_examples=300, deadline=None)
@given(trees_and_counts())
def test_minimum_pods_is_tight(case):
    _gang, tree, _counts = case
    needed = minimum_pods(tree)
    fewer_everywhere = [max(0, (node.leaf_minimum() if node.is_leaf else 0)) for node in tree.nodes]
    assert is_ready(tree, fewer_everywhere)
    assert sum(fewer_everywhere[i] for i in tree.leaves) >= needed
    assert not is_ready(tree, [0] * len(tree.nodes)) or needed == 0


@settings(max_examples=300, deadline=None)
@given(trees_and_counts())
def test_core_of_a_ready_gang_keeps_it_ready_and_has_the_minimum(case):
    _gang, tree, counts = case
    if not is_ready(tree, counts):
        return
    core = core_counts(tree, counts)
    assert all(core[i] <= counts[i] for i in tree.leaves)
    assert is_ready(tree, core)


def test_minimum_gpus_counts_the_pods_a_gang_needs_to_start():
    # KAI pkg/scheduler/actions/allocate/allocateElastic_test.go ("Allocate elastic job -
    # partial allocate"): an elastic gang starts with its minimum, so admission compares
    # the minimum (not every pod) with the quota.
    from scheduler.core.model import Gang, Pod, SubGroup
    from scheduler.core.readiness import build_tree, minimum_gpus

    elastic = Gang("g", "q", subgroups=(SubGroup("a", min_member=1), SubGroup("b", min_member=1)),
                   pods=tuple(Pod(f"p-{i}", subgroup="ab"[i % 2], gpus=1) for i in range(4)))
    assert minimum_gpus(build_tree(elastic)) == 2
    plain = Gang("h", "q", min_member=3, pods=tuple(Pod(f"p-{i}", gpus=2) for i in range(4)))
    assert minimum_gpus(build_tree(plain)) == 6
    two_of_three = Gang("k", "q", min_subgroup=1,
                        subgroups=(SubGroup("big", min_member=1), SubGroup("small", min_member=1)),
                        pods=(Pod("x-0", subgroup="big", gpus=8),
                              Pod("y-0", subgroup="small", gpus=2)))
    assert minimum_gpus(build_tree(two_of_three)) == 2
    beside = Gang("m", "q", min_member=3, subgroups=(SubGroup("a", min_member=1),),
                  pods=tuple(Pod(f"p-{i}", subgroup="a", gpus=1) for i in range(4)))
    assert minimum_gpus(build_tree(beside)) == 3


# --- natural pod order ------------------------------------------------------------------------

_NAME_PARTS = st.lists(st.one_of(st.sampled_from(["pod-", "w", "-", "a1b", "é", "²", "0"]),
                                 st.integers(0, 120).map(str)), min_size=0, max_size=4)


@settings(max_examples=300, deadline=None)
@given(st.lists(_NAME_PARTS.map("".join), min_size=0, max_size=12),
       st.sampled_from(["", "job-7-", "x"]))
def test_natural_order_is_the_stable_sort_by_natural_key(names, prefix):
    members = [Pod(f"{prefix}{name}") for name in names]
    assert natural_order(members) == sorted(members, key=lambda pod: natural_key(pod.name))


def test_natural_order_by_trailing_number_and_zero_padding():
    members = [Pod(name) for name in ("w-10", "w-9", "w-09", "w-1", "w-100")]
    assert [pod.name for pod in natural_order(members)] == ["w-1", "w-9", "w-09", "w-10",
                                                             "w-100"]
