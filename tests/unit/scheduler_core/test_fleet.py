"""The fleet choice: which backend a gang goes to, and why each other one was passed over."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.core.fleet import BackendOption, choose, judge, move_target, split_quota
from scheduler.core.model import Node, Topology
from tests.unit.scheduler_core.builders import gang, leaf, nodes, pods, topology

NONE = Topology()


def busy(node_list, gpus_each: int, until: float = float("inf")) -> tuple[Node, ...]:
    """Each node with `gpus_each` GPUs held by work that ends at `until`."""
    return tuple(replace(n, bound=(gpus_each, 0, 0),
                         releases=((until, gpus_each, 0, 0, "other"),) if gpus_each else ())
                 for n in node_list)


def whole_nodes_gang(count: int, gpus: int = 8):
    return gang("big", pod_list=pods("p", count, gpus=gpus), min_member=count)


def test_a_gang_goes_where_it_starts_now_over_the_pools_first_backend():
    options = [BackendOption("a", busy(nodes(16, prefix="a"), 4), NONE),
               BackendOption("b", busy(nodes(16, prefix="b"), 0), NONE)]
    choice = choose(whole_nodes_gang(16), options, now=0.0)
    assert choice.backend == "b"
    a = choice.verdict("a")
    assert (a.eligible, a.starts_now, a.start, a.free_gpus) == (True, False, None, 64)
    assert a.reason.code == "insufficient_gpus"
    assert choice.verdict("b").reason is None


def test_whole_nodes_are_needed_not_a_sum_of_free_gpus():
    # 16 × 8 GPUs: 32 nodes half free have 128 free GPUs, and still no room.
    half = BackendOption("half", busy(nodes(32, prefix="h"), 4), NONE)
    verdict = judge(whole_nodes_gang(16), half, 0.0)
    assert (verdict.starts_now, verdict.free_gpus) == (False, 128)
    assert (verdict.reason.code, verdict.reason.message) == (
        "insufficient_gpus", "no 16 whole 8-GPU nodes free (0 are)")
    mixed = BackendOption("mixed", busy(nodes(8, prefix="m"), 0) + busy(nodes(24, prefix="x"),
                                                                        4), NONE)
    assert judge(whole_nodes_gang(16), mixed, 0.0).reason.message == (
        "no 16 whole 8-GPU nodes free (8 are)")
    # Pods smaller than a node: the placement's own words.
    small_pods = gang("small", pod_list=pods("p", 40, gpus=4), min_member=40)
    assert "whole" not in judge(small_pods, half, 0.0).reason.message


def test_a_backend_that_could_never_hold_it_is_filtered_out():
    small = BackendOption("small", nodes(8, prefix="s"), NONE)  # 8 nodes: never 16 of them
    later = BackendOption("later", busy(nodes(16, prefix="l"), 8, until=100.0), NONE)
    choice = choose(whole_nodes_gang(16), [small, later], now=0.0)
    assert choice.backend == "later"
    s = choice.verdict("small")
    assert (s.eligible, s.start) == (False, None)
    assert s.reason.message == ("its nodes could never hold the gang, even empty: it has 8 "
                                "node(s) of 8 GPUs; the gang needs 16 whole one(s)")
    assert choice.verdict("later").start == 100.0  # the work there ends at 100


def test_the_soonest_start_wins_among_backends_that_cannot_start_it_now():
    options = [BackendOption("slow", busy(nodes(4, prefix="s"), 8, until=900.0), NONE),
               BackendOption("soon", busy(nodes(4, prefix="q"), 8, until=60.0), NONE),
               BackendOption("never", busy(nodes(4, prefix="n"), 8), NONE)]
    choice = choose(whole_nodes_gang(4), options, now=0.0)
    assert choice.backend == "soon"
    assert [(v.backend, v.start) for v in choice.verdicts] == [
        ("slow", 900.0), ("soon", 60.0), ("never", None)]


def test_ties_go_to_more_free_gpus_then_the_pools_order():
    g = gang("one", pod_list=pods("p", 1, gpus=8), min_member=1)
    options = [BackendOption("first", nodes(2, prefix="f"), NONE),
               BackendOption("roomier", nodes(3, prefix="r"), NONE),
               BackendOption("twin", nodes(3, prefix="t"), NONE)]
    choice = choose(g, options, now=0.0)
    assert choice.backend == "roomier"
    assert choice.verdict("twin").reason.code == "backend_ranked_lower"
    assert choose(g, options[:1] + options[2:], now=0.0).backend == "twin"


def test_an_unusable_backend_takes_nothing_and_says_why():
    options = [BackendOption("a", nodes(4, prefix="a"), NONE, unusable="offline: no heartbeat "
                                                                       "for 45 s"),
               BackendOption("b", busy(nodes(4, prefix="b"), 8, until=10.0), NONE)]
    choice = choose(whole_nodes_gang(1), options, now=0.0)
    assert choice.backend == "b"
    assert choice.verdict("a").reason.message == "offline: no heartbeat for 45 s"
    assert choose(whole_nodes_gang(1), options[:1], now=0.0).backend is None


def test_topology_constraints_are_met_within_one_backend():
    racks = topology("rack")
    # a: 4 racks of 2 nodes (no rack holds 4 whole nodes); b: one rack of 4 nodes.
    a = nodes(8, prefix="a", labels=lambda i: {"rack": f"ra{i // 2}"})
    b = nodes(4, prefix="b", labels=lambda i: {"rack": "rb"})
    g = gang("r", pod_list=pods("p", 4, gpus=8, subgroup="w"),
             subgroups=(leaf("w", 4, required="rack"),), min_member=4)
    choice = choose(g, [BackendOption("a", a, racks), BackendOption("b", b, racks)], now=0.0)
    assert choice.backend == "b"
    assert choice.verdict("a").eligible is False
    # A Topology without the level: the constraint cannot be met there.
    assert judge(g, BackendOption("flat", b, NONE), 0.0).reason.code == "topology_unknown_level"


def test_a_waiting_gang_moves_once_per_interval_and_never_after_running():
    g = whole_nodes_gang(2)
    options = [BackendOption("a", busy(nodes(2, prefix="a"), 8), NONE),
               BackendOption("b", nodes(2, prefix="b"), NONE)]
    assert move_target(g, "a", options, 100.0, ran=False, last_moved=None, interval=60) == "b"
    assert move_target(g, "a", options, 100.0, ran=False, last_moved=50.0, interval=60) is None
    assert move_target(g, "a", options, 100.0, ran=True, last_moved=None, interval=60) is None
    # It starts where it is: it stays.
    assert move_target(g, "b", options, 100.0, ran=False, last_moved=None, interval=60) is None


@settings(max_examples=60, deadline=None)
@given(shapes=st.lists(st.tuples(st.integers(1, 6), st.integers(0, 8),
                                 st.sampled_from([10.0, 50.0, float("inf")])),
                       min_size=1, max_size=4),
       size=st.integers(1, 5), gpus=st.sampled_from([1, 4, 8]))
def test_the_choice_is_sound(shapes, size, gpus):
    """The chosen backend could hold the gang; if any backend starts it now, the chosen one
    does; the choice never falls on an ineligible backend."""
    options = [BackendOption(f"b{i}", busy(nodes(count, prefix=f"b{i}"), held, until), NONE)
               for i, (count, held, until) in enumerate(shapes)]
    g = whole_nodes_gang(size, gpus)
    choice = choose(g, options, now=0.0)
    verdicts = {v.backend: v for v in choice.verdicts}
    if choice.backend is None:
        assert not any(v.eligible for v in verdicts.values())
        return
    chosen = verdicts[choice.backend]
    assert chosen.eligible and chosen.reason is None
    assert chosen.starts_now == any(v.starts_now for v in verdicts.values())
    if not chosen.starts_now and chosen.start is not None:
        assert all(v.start is None or v.start >= chosen.start for v in verdicts.values())


def test_a_quota_is_shared_by_what_each_cluster_holds_and_the_rest_goes_first():
    assert split_quota(64, {"b": 16}, ["a", "b"]) == {"a": 48, "b": 16}
    assert split_quota(64, {}, ["a", "b", "c"]) == {"a": 64, "b": 0, "c": 0}
    assert split_quota(64, {"x": 8}, ["a"]) == {"a": 64}  # one backend: the whole quota
    # A quota lowered below what runs: the shares still sum to it.
    assert split_quota(10, {"a": 8, "b": 8}, ["a", "b"]) == {"a": 8, "b": 2}
    assert split_quota(0, {"a": 3}, ["a", "b"]) == {"a": 0, "b": 0}


def test_a_gang_sent_to_one_cluster_never_takes_the_share_of_anothers_running_work():
    # Quota 8: 4 run in each cluster; a third gang of 4 waits in `a`. Counting it with what
    # runs would give `a` 8 and `b` 0, and KAI in `a` would start it: 12 guaranteed.
    assert split_quota(8, {"a": 4, "b": 4}, ["a", "b"], {"a": 4}) == {"a": 4, "b": 4}
    assert split_quota(8, {"b": 4}, ["a", "b"], {"a": 4, "b": 4}) == {"a": 4, "b": 4}
    assert split_quota(16, {"b": 4}, ["a", "b"], {"b": 4}) == {"a": 8, "b": 8}


@settings(max_examples=200, deadline=None)
@given(quota=st.integers(0, 512),
       held=st.dictionaries(st.sampled_from("abcd"), st.integers(0, 256), max_size=4),
       waiting=st.dictionaries(st.sampled_from("abcd"), st.integers(0, 256), max_size=4),
       order=st.lists(st.sampled_from("abcd"), min_size=1, max_size=4, unique=True))
def test_the_clusters_quotas_never_sum_above_the_pools(quota, held, waiting, order):
    shares = split_quota(quota, held, order, waiting)
    assert set(shares) == set(order) and sum(shares.values()) == quota
    assert all(share >= 0 for share in shares.values())
    if sum(held.get(b, 0) for b in order) <= quota:  # what runs keeps its share, whatever waits
        assert all(shares[b] >= held.get(b, 0) for b in order)


def test_a_reserved_gang_holds_its_nodes_for_the_next_choice():
    from scheduler.core.fleet import reserve

    option = BackendOption("a", busy(nodes(2, prefix="a"), 0), NONE)
    held, fitted = reserve(whole_nodes_gang(2), option)
    assert fitted and [n.bound for n in held.nodes] == [(8, 0, 0), (8, 0, 0)]
    again, fitted = reserve(whole_nodes_gang(1), held)
    assert not fitted and again is held  # no room left: unchanged
    assert not judge(whole_nodes_gang(1), held, now=0.0).starts_now
    off = replace(option, unusable="OFFLINE")
    assert reserve(whole_nodes_gang(1), off) == (off, False)


def test_the_ever_memo_gives_the_same_verdicts():
    options = [BackendOption("a", busy(nodes(1, prefix="a"), 0), NONE),
               BackendOption("b", busy(nodes(4, prefix="b"), 4), NONE)]
    memo: dict = {}
    for count in (2, 2, 1):
        assert choose(whole_nodes_gang(count), options, 0.0, memo) == \
            choose(whole_nodes_gang(count), options, 0.0)
    assert len(memo) == 4  # two shapes on two backends


def test_a_live_view_chooses_and_reserves_as_rebuilding_the_nodes_does():
    from scheduler.core.fleet import reserve, with_live

    def run(live: bool) -> list[str | None]:
        options = [BackendOption("a", busy(nodes(4, prefix="a"), 4), NONE),
                   BackendOption("b", busy(nodes(2, prefix="b"), 0), NONE)]
        if live:
            options = [with_live(o) for o in options]
        picked = []
        for count, gpus in ((2, 8), (1, 4), (2, 4), (1, 8), (4, 2), (1, 4)):
            g = gang("g", pod_list=pods("p", count, gpus=gpus), min_member=count)
            choice = choose(g, options, 0.0)
            picked.append(choice.backend)
            if choice.backend is not None:
                i = [o.name for o in options].index(choice.backend)
                options[i], _ = reserve(g, options[i])
        return picked

    assert run(live=True) == run(live=False) == ["b", "a", "a", "a", "a", "a"]
