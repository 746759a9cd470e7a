"""Owner walk, skip-top-owner and the plugin registry."""

from __future__ import annotations

from scheduler.podgrouper import (
    Grouper,
    group_pod,
    grouper_for,
    index_lookup,
    owner_chain,
    register,
    registered_kinds,
)
from scheduler.podgrouper.registry import GROUPERS

from .helpers import QUEUE, obj, pod_spec


def test_walk_follows_the_controller_reference_to_the_top() -> None:
    deployment = obj("apps/v1", "Deployment", "web", {})
    replica_set = obj("apps/v1", "ReplicaSet", "web-abc", owner=deployment)
    pod = obj("v1", "Pod", "web-abc-1", pod_spec(), owner=replica_set)
    pod["metadata"]["ownerReferences"].insert(0, {"apiVersion": "v1", "kind": "ConfigMap",
                                                  "name": "not-controller"})
    chain = owner_chain(pod, index_lookup([deployment, replica_set]))
    assert [o["metadata"]["name"] for o in chain.owners] == ["web-abc", "web"]
    assert chain.top is chain.owners[-1]
    meta = group_pod(pod, [deployment, replica_set], default_queue=QUEUE)
    assert (meta.name, meta.min_member, meta.priority_class, meta.grouper, meta.queue) == \
        ("pg-web-abc-1", 1, "inference", "deployment", QUEUE)


def test_missing_owner_ends_the_walk_at_the_last_found() -> None:
    job = obj("batch/v1", "Job", "j", {}, owner=obj("example.com/v1", "Gone", "x"))
    pod = obj("v1", "Pod", "j-0", pod_spec(), owner=job)
    chain = owner_chain(pod, index_lookup([job]))
    assert chain.top["metadata"]["name"] == "j"
    assert owner_chain(obj("v1", "Pod", "bare", pod_spec()), index_lookup([])).top["kind"] == \
        "Pod"


def test_owner_cycles_stop() -> None:
    a = obj("example.com/v1", "A", "a", {})
    b = obj("example.com/v1", "B", "b", {}, owner=a)
    a["metadata"]["ownerReferences"] = [{"apiVersion": "example.com/v1", "kind": "B",
                                         "name": "b", "controller": True}]
    pod = obj("v1", "Pod", "p", pod_spec(), owner=b)
    chain = owner_chain(pod, index_lookup([a, b]))
    assert [o["kind"] for o in chain.owners] == ["B", "A"]


def test_skip_top_owner_delegates_with_labels_copied() -> None:
    argo = obj("argoproj.io/v1alpha1", "Workflow", "wf", {},
               labels={"kai.scheduler/queue": "team-q", "priorityClassName": "build"})
    trainjob = obj("trainer.kubeflow.org/v1alpha1", "TrainJob", "tj", {}, owner=argo,
                   labels={"priorityClassName": "inference"})
    jobset = obj("jobset.x-k8s.io/v1alpha2", "JobSet", "js", {"replicatedJobs": [
        {"name": "node", "replicas": 2, "template": {"spec": {"template": {}}}}]},
        owner=trainjob)
    job = obj("batch/v1", "Job", "js-node-0", owner=jobset)
    pod = obj("v1", "Pod", "js-node-0-0", pod_spec(),
              labels={"jobset.sigs.k8s.io/replicatedjob-name": "node"}, owner=job)
    objects = [argo, trainjob, jobset, job]
    chain = owner_chain(pod, index_lookup(objects))
    assert [o["kind"] for o in chain.skipped] == ["Workflow", "TrainJob"]
    assert chain.top["kind"] == "JobSet"
    assert chain.top["metadata"]["labels"] == {"kai.scheduler/queue": "team-q",
                                               "priorityClassName": "build"}
    meta = group_pod(pod, objects, default_queue=QUEUE)
    assert (meta.grouper, meta.name, meta.queue, meta.priority_class, meta.subgroup) == \
        ("jobset", "pg-js", "team-q", "build", "node")
    assert jobset["metadata"].get("labels") is None  # inputs are never modified


def test_skip_owner_directly_above_the_pod_groups_the_pod_itself() -> None:
    argo = obj("argoproj.io/v1alpha1", "Workflow", "wf", {}, labels={"team": "a"})
    dynamo = obj("nvidia.com/v1alpha1", "DynamoGraphDeployment", "dg", {}, owner=argo)
    pod = obj("v1", "Pod", "step-1", pod_spec(), owner=dynamo)
    meta = group_pod(pod, [argo, dynamo])
    assert (meta.grouper, meta.name, meta.min_member, meta.owner.kind) == \
        ("pod", "pg-step-1", 1, "Pod")
    assert meta.labels == {"team": "a"}


def test_unknown_kinds_use_the_default_grouper() -> None:
    custom = obj("example.com/v1", "Trainer", "t", {})
    pod = obj("v1", "Pod", "t-0", pod_spec(), owner=custom)
    meta = group_pod(pod, [custom])
    assert (meta.grouper, meta.name, meta.min_member, meta.priority_class, meta.queue) == \
        ("default", "pg-t", 1, "train", None)
    assert grouper_for(custom).name == "default"


def test_registry_lists_the_built_in_kinds_and_takes_new_ones() -> None:
    kinds = registered_kinds()
    assert kinds == {
        ("", "Pod"): "pod", ("apps", "Deployment"): "deployment", ("batch", "Job"): "job",
        ("grove.io", "PodCliqueSet"): "grove", ("grove.io", "PodGangSet"): "grove",
        ("jobset.x-k8s.io", "JobSet"): "jobset",
        ("kubeflow.org", "MPIJob"): "mpijob", ("kubeflow.org", "PyTorchJob"): "pytorchjob",
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): "leaderworkerset",
    }

    @register("example.com", "Sweep")
    class SweepGrouper(Grouper):
        name = "sweep"
        default_priority_class = "build"

        def metadata(self, top, pod, chain):
            return self.meta(top, name="pg-sweep", min_member=top["spec"]["gang"])

    try:
        sweep = obj("example.com/v1", "Sweep", "s", {"gang": 3})
        meta = group_pod(obj("v1", "Pod", "s-0", pod_spec(), owner=sweep), [sweep])
        assert (meta.grouper, meta.min_member, meta.priority_class) == ("sweep", 3, "build")
    finally:
        del GROUPERS[("example.com", "Sweep")]
