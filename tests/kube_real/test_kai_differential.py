"""The same cluster, queue and PodGroups given once to the real KAI Scheduler (v0.17.0) and once
to our scheduler (``OSMO_PLACEMENT=osmo``) on the same API server, one after the other in one
namespace, and the outcomes compared: which gangs run and with how many pods, which pods were
evicted, which racks each subgroup landed in. Where the two differ on purpose (reservations
for a large gang that KAI lets starve), the test shows both sides and docs/SCHEDULING.md says
why ours is the rule.

One KAI for the module (``kai``, which watches pods with ``schedulerName: kai-scheduler``);
our scheduler (``sched``) takes those with ``osmo-scheduler``. Each run starts on fresh nodes
and an empty namespace, so neither sees the other's pods."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from scheduler.core.kai_names import HOSTNAME_LABEL, RACK_LABEL, TOPOLOGY_API_VERSION

from .conftest import wait_for
from .kai import add_node
from .osmo_placement import SCHEDULER, pod, podgroup, queue

pytestmark = pytest.mark.django_db

KAI = "kai-scheduler"


@dataclass(frozen=True)
class Gang:
    name: str
    pods: int  # per subgroup when ``subgroups`` is given
    gpus: int
    min_member: int | None = None
    priority_class: str = "osmo-normal"
    subgroups: tuple[str, ...] = ()
    spec: dict[str, Any] = field(default_factory=dict)
    subgroup_spec: dict[str, Any] = field(default_factory=dict)

    def pod_names(self) -> dict[str | None, list[str]]:
        if not self.subgroups:
            return {None: [f"{self.name}-{i}" for i in range(self.pods)]}
        return {s: [f"{self.name}-{s}-{i}" for i in range(self.pods)] for s in self.subgroups}


@dataclass(frozen=True)
class Outcome:
    bound: dict[str, int]  # gang → pods bound (and not deleted)
    racks: dict[str, tuple[str, ...]]  # "gang/subgroup" → the racks its bound pods are on
    evicted: tuple[str, ...]  # pods made and then deleted by the scheduler


class Run:
    """One scheduler's run of a scenario in the test's namespace."""

    def __init__(self, apiserver, cluster, namespace: str, scheduler: str,
                 step: Callable[[], None]):
        self.apiserver, self.cluster, self.namespace = apiserver, cluster, namespace
        self.scheduler, self.step = scheduler, step
        self.queue = f"{namespace}-q"
        self.gangs: list[Gang] = []
        self.racks: dict[str, str] = {}

    def nodes(self, spec: dict[str, tuple[int, str | None]]) -> None:
        """name → (GPUs, rack or None)."""
        for name, (gpus, rack) in spec.items():
            add_node(self.cluster, name, gpus=gpus, labels={RACK_LABEL: rack} if rack else None)
            if rack:
                self.racks[name] = rack

    def gang(self, gang: Gang) -> None:
        self.apiserver.create(queue(self.queue), exist_ok=True)
        fields = dict(gang.spec)
        if gang.subgroups:
            fields["subGroups"] = [{"name": s, "minMember": gang.pods, **gang.subgroup_spec}
                                   for s in gang.subgroups]
        self.apiserver.create(podgroup(self.namespace, gang.name, self.queue,
                                       min_member=gang.min_member,
                                       priority_class=gang.priority_class, **fields))
        for subgroup, names in gang.pod_names().items():
            for name in names:
                self.apiserver.create(pod(self.namespace, name, gang.name, self.queue,
                                          gpus=gang.gpus, subgroup=subgroup,
                                          priority_class=gang.priority_class,
                                          scheduler=self.scheduler))
        self.gangs.append(gang)

    def pods(self) -> dict[str, dict]:
        body = self.apiserver.request("GET", f"/api/v1/namespaces/{self.namespace}/pods")
        return {p["metadata"]["name"]: p for p in body["items"]}

    def outcome(self) -> Outcome:
        pods = self.pods()

        def node(name: str) -> str | None:
            found = pods.get(name)
            if found is None or found["metadata"].get("deletionTimestamp"):
                return None
            return found["spec"].get("nodeName")

        bound, racks, evicted = {}, {}, []
        for gang in self.gangs:
            count = 0
            for subgroup, names in gang.pod_names().items():
                nodes = [node(name) for name in names]
                count += sum(1 for n in nodes if n)
                if subgroup is not None:
                    racks[f"{gang.name}/{subgroup}"] = tuple(sorted(
                        {self.racks.get(n, "-") for n in nodes if n}))
                evicted += [name for name in names
                            if name not in pods or pods[name]["metadata"].get(
                                "deletionTimestamp")]
            bound[gang.name] = count
        return Outcome(bound, racks, tuple(sorted(evicted)))

    def settled(self, quiet: float = 3.0, timeout: float = 30.0) -> Outcome:
        """The outcome once it has not changed for ``quiet`` seconds (KAI cycles about once a
        second; our scheduler is stepped)."""
        deadline = time.monotonic() + timeout
        last, since = None, time.monotonic()
        while time.monotonic() < deadline:
            self.step()
            current = self.outcome()
            if current != last:
                last, since = current, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return current
            time.sleep(0.1)
        raise AssertionError(f"{self.scheduler}: no settled outcome; last {last}")

    def finish(self, name: str) -> None:
        wait_for(lambda: (self.pods().get(name) or {}).get("status", {}).get("phase")
                 == "Running", 20, what=f"{name} running")
        self.cluster.finish(name)

    def clear(self) -> None:
        """The namespace's pods and PodGroups deleted, the nodes removed."""
        base = f"/api/v1/namespaces/{self.namespace}/pods"
        self.apiserver.request("DELETE", base, query=[("gracePeriodSeconds", "0")])
        self.apiserver.request(
            "DELETE", f"/apis/scheduling.run.ai/v2alpha2/namespaces/{self.namespace}/podgroups")
        wait_for(lambda: not self.pods(), 20, what="the namespace empty")
        for name in list(self.cluster.added):
            self.cluster.delete_node(name)
        self.cluster.added.clear()


@pytest.fixture
def runs(kai_cluster, sched, apiserver, cluster, namespace):
    """``runs(scenario)`` → (KAI's outcome, ours): the scenario run on KAI, then on ours."""
    def both(scenario: Callable[[Run], Outcome]) -> tuple[Outcome, Outcome]:
        on_kai = Run(apiserver, cluster, namespace, KAI, kai_cluster.check)
        kai_outcome = scenario(on_kai)
        on_kai.clear()
        ours = Run(apiserver, cluster, namespace, SCHEDULER, lambda: sched.settle(0.1))
        wait_for(lambda: not [p for p in sched.cache.pods.items()
                              if p["metadata"].get("namespace") == namespace], 20,
                 what="our cache to drop KAI's pods")
        return kai_outcome, scenario(ours)
    return both


# --- the seeds' gangs -----------------------------------------------------------------------

def test_seed_000_min_subgroup_3_of_4_binds_three_whole_replicas_on_both(runs) -> None:
    def scenario(run: Run) -> Outcome:
        run.nodes({f"n{i}": (8, None) for i in range(3)})
        run.gang(Gang("prefill", pods=8, gpus=1, subgroups=("p0", "p1", "p2", "p3"),
                      spec={"minSubGroup": 3}))
        return run.settled()

    kai, ours = runs(scenario)
    assert kai.bound == ours.bound == {"prefill": 24}
    whole = {key for key, racks in kai.racks.items() if racks}
    assert len(whole) == 3 and len({k for k, r in ours.racks.items() if r}) == 3


def test_a_gang_that_does_not_fit_binds_no_pod_on_both(runs) -> None:
    def scenario(run: Run) -> Outcome:
        run.nodes({"n1": (4, None), "n2": (4, None)})
        run.gang(Gang("big", pods=3, gpus=4, min_member=3))
        return run.settled()

    kai, ours = runs(scenario)
    assert kai == ours == Outcome({"big": 0}, {}, ())


RACKS = {"a0": (8, "r2"), "b0": (8, "r1"), "b1": (8, "r1"), "c0": (8, "r3"), "c1": (8, "r3")}
RACKED_TOPOLOGY = "diff-racks"


def racked(run: Run, constraint: dict[str, str]) -> Outcome:
    """Two subgroups of two 8-GPU pods, each to keep to one rack; r2 (first by name) is one
    node, too small for either."""
    run.apiserver.create({
        "apiVersion": TOPOLOGY_API_VERSION, "kind": "Topology",
        "metadata": {"name": RACKED_TOPOLOGY},
        "spec": {"levels": [{"nodeLabel": RACK_LABEL}, {"nodeLabel": HOSTNAME_LABEL}]}},
        exist_ok=True)
    run.nodes(RACKS)
    run.gang(Gang("racked", pods=2, gpus=8, subgroups=("a", "b"),
                  subgroup_spec={"topologyConstraint": constraint}))
    return run.settled()


def one_rack_each(outcome: Outcome) -> bool:
    return sorted(r for racks in outcome.racks.values() for r in racks) == ["r1", "r3"]


def test_each_subgroup_keeps_to_one_rack_on_both(runs) -> None:
    kai, ours = runs(lambda run: racked(run, {"requiredTopologyLevel": RACK_LABEL,
                                              "topology": RACKED_TOPOLOGY}))
    assert kai.bound == ours.bound == {"racked": 4}
    assert one_rack_each(kai) and one_rack_each(ours), (kai, ours)


def test_a_constraint_naming_no_topology_is_kept_by_ours_and_dropped_by_kai(runs) -> None:
    """KAI v0.17 ignores a topologyConstraint without ``topology``; ours reads its level on
    the cluster's nodes (docs/SCHEDULING.md). The product's own PodGroups always name it.
    Two 8-GPU pods that must share a rack, on two racks of one 8-GPU node each: a constraint
    that is read binds nothing, one that is dropped binds both (one pod on each rack)."""
    def split(run: Run) -> Outcome:
        run.nodes({"s0": (8, "r1"), "s1": (8, "r2")})
        run.gang(Gang("split", pods=2, gpus=8, subgroups=("a",), subgroup_spec={
            "topologyConstraint": {"requiredTopologyLevel": RACK_LABEL}}))
        return run.settled()

    kai, ours = runs(split)
    assert ours.bound == {"split": 0}, ours
    assert kai.bound == {"split": 2}, kai
    assert sorted(kai.racks["split/a"]) == ["r1", "r2"], kai


def test_low_work_is_evicted_whole_for_normal_work_on_both(runs) -> None:
    def scenario(run: Run) -> Outcome:
        run.nodes({"n1": (8, None)})
        run.gang(Gang("low", pods=2, gpus=4, min_member=2, priority_class="osmo-low"))
        assert run.settled().bound == {"low": 2}
        run.gang(Gang("normal", pods=1, gpus=8))
        return run.settled()

    kai, ours = runs(scenario)
    assert kai == ours == Outcome({"low": 0, "normal": 1}, {}, ("low-0", "low-1"))


# --- the deliberate difference: a large gang among a stream of small ones --------------------

def test_a_large_gang_starves_on_kai_and_starts_on_ours_by_its_reservation(runs,
                                                                           sched) -> None:
    """Two 8-GPU nodes full of 4-GPU jobs; a gang of two 8-GPU pods waits; each time a small
    job ends another arrives. KAI (no reservation) gives every hole to the newcomer, so the
    gang never runs; ours reserves the nodes as they free up (``reserve_after_seconds``) and
    starts the gang once the first jobs have ended, the newcomers waiting behind it."""
    sched.placement.config = replace(sched.placement.config, reserve_after_seconds=0)

    def scenario(run: Run) -> Outcome:
        run.nodes({"n1": (8, None), "n2": (8, None)})
        for i in range(4):
            run.gang(Gang(f"small{i}", pods=1, gpus=4))
        assert run.settled(quiet=1.5).bound == {f"small{i}": 1 for i in range(4)}
        run.gang(Gang("large", pods=2, gpus=8, min_member=2))
        for i in range(4):
            run.finish(f"small{i}-0")
            run.gang(Gang(f"late{i}", pods=1, gpus=4))
            run.settled(quiet=1.5)
        outcome = run.settled(quiet=1.5)
        return replace(outcome, bound={name: count for name, count in outcome.bound.items()
                                       if not name.startswith("small")})

    kai, ours = runs(scenario)
    assert kai.bound == {"large": 0, "late0": 1, "late1": 1, "late2": 1, "late3": 1}
    assert ours.bound == {"large": 2, "late0": 0, "late1": 0, "late2": 0, "late3": 0}
