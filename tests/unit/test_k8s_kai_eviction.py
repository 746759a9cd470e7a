"""A pod KAI deleted for a reclaim or a preemption: KAI v0.17 leaves no condition on it by
default, only its ``Evict`` Event on the PodGroup, annotated with the action and the
preemptor."""

from scheduler.backends.kubernetes.status import Eviction, kai_eviction, observe

POD = {"metadata": {"name": "low-g-t0", "creationTimestamp": "2026-12-02T06:00:00Z",
                    "annotations": {"pod-group-name": "low-g"}},
       "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}


def evict(action: str, at: str = "2026-12-02T06:00:05Z", **preemptor: str) -> dict:
    annotations = {"evictor-action-type": action, "num-evicted-pods": "2"}
    if preemptor:
        annotations.update({"evictor-pod-group-namespace": preemptor["namespace"],
                            "evictor-pod-group-name": preemptor["name"]})
    return {"reason": "Evict", "type": "Normal", "lastTimestamp": at,
            "metadata": {"annotations": annotations},
            "involvedObject": {"kind": "PodGroup", "name": "low-g"}}


def test_a_reclaim_or_a_preemption_names_the_preemptor() -> None:
    for action in ("reclaim", "preempt"):
        eviction = kai_eviction(POD, [evict(action, namespace="osmo", name="train-1-g")])
        assert eviction == Eviction(action, "osmo/train-1-g")
        seen = observe(POD, deleted=True, eviction=eviction)
        assert (seen.status, seen.reason, seen.node, seen.eviction) == (
            "FAILED_PREEMPTED", "preempted", "n1", eviction)


def test_other_evictions_and_events_before_the_pod_say_nothing() -> None:
    assert kai_eviction(POD, [evict("consolidation"), evict("stalegangeviction")]) is None
    assert kai_eviction(POD, [evict("reclaim", at="2026-12-02T05:59:59Z")]) is None
    assert kai_eviction(POD, [{**evict("reclaim"), "reason": "Scheduled"}]) is None
    assert kai_eviction(POD, []) is None
    seen = observe(POD, deleted=True)
    assert (seen.status, seen.reason) == ("FAILED_EVICTED", "pod_deleted")


def test_the_latest_eviction_decides() -> None:
    events = [evict("reclaim", at="2026-12-02T06:00:09Z", namespace="osmo", name="b"),
              evict("consolidation", at="2026-12-02T06:00:02Z")]
    assert kai_eviction(POD, events) == Eviction("reclaim", "osmo/b")
