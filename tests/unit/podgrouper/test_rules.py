"""Rules shared by every plugin: class, queue, preemptibility, topology, priorities, Lists."""

from __future__ import annotations

import pytest

from scheduler.podgrouper import (
    KNOWN_PRIORITY_CLASSES,
    WorkloadError,
    group_pod,
    group_workload,
    pod_gpus,
    priority_from_class,
)

from .helpers import QUEUE, assert_valid, obj, pod_spec, template


def grouped(manifest, **kwargs):
    grouping = group_workload(manifest, namespace="osmo", default_queue=QUEUE, **kwargs)
    assert_valid(grouping)
    return grouping


def job(name="j", labels=None, annotations=None, **template_extra):
    return obj("batch/v1", "Job", name, {"template": template(1, **template_extra)},
               labels=labels, annotations=annotations)


def test_priority_class_precedence_pod_spec_then_owner_label_then_pod_label() -> None:
    owner = obj("example.com/v1", "Thing", "t", {}, labels={"priorityClassName": "build"})
    pod = obj("v1", "Pod", "p", pod_spec(), owner=owner, labels={"priorityClassName": "osmo-low"})
    assert group_pod(pod, [owner]).priority_class == "build"
    pod["spec"]["priorityClassName"] = "osmo-high"
    assert group_pod(pod, [owner]).priority_class == "osmo-high"
    del owner["metadata"]["labels"]
    del pod["spec"]["priorityClassName"]
    assert group_pod(pod, [owner]).priority_class == "osmo-low"


def test_class_label_overrides_the_plugin_default_and_sets_the_priority() -> None:
    grouping = grouped(job(labels={"priorityClassName": "build"}))
    assert grouping.groups[0].manifests.podgroup["spec"]["priorityClassName"] == "build"
    assert grouping.groups[0].manifests.podgroup["spec"]["preemptibility"] == "non-preemptible"
    assert grouping.priority == "NORMAL"
    pods = grouping.groups[0].manifests.pods
    assert pods[0]["spec"]["priorityClassName"] == "build"


@pytest.mark.parametrize(("pclass", "priority", "preemptibility"), [
    ("osmo-high", "HIGH", "non-preemptible"), ("osmo-normal", "NORMAL", "non-preemptible"),
    ("osmo-low", "LOW", "preemptible"), ("inference", "HIGH", "non-preemptible"),
    ("build", "NORMAL", "non-preemptible"), ("build-preemptible", "LOW", "preemptible"),
    ("train", "LOW", "preemptible"),
])
def test_known_classes_map_to_priorities(pclass, priority, preemptibility) -> None:
    grouping = grouped(obj("v1", "Pod", "p", pod_spec(priorityClassName=pclass)))
    assert grouping.priority == priority
    assert grouping.groups[0].manifests.podgroup["spec"]["preemptibility"] == preemptibility


def test_priority_value_rule_and_preemptibility_override() -> None:
    assert [priority_from_class(v) for v in (200, 125, 124, 100, 99, 0)] == \
        ["HIGH", "HIGH", "NORMAL", "NORMAL", "LOW", "LOW"]
    assert priority_from_class(125, "preemptible") == "LOW"
    assert priority_from_class(50, "non-preemptible") == "NORMAL"
    assert priority_from_class(130, "non-preemptible") == "HIGH"
    assert KNOWN_PRIORITY_CLASSES["build-preemptible"] == 75


def test_preemptibility_label_overrides_the_value_rule() -> None:
    grouping = grouped(job(labels={"priorityClassName": "inference",
                                   "kai.scheduler/preemptibility": "preemptible"}))
    assert grouping.priority == "LOW"
    assert grouping.groups[0].manifests.podgroup["spec"]["preemptibility"] == "preemptible"
    with pytest.raises(WorkloadError) as caught:
        group_workload(job(labels={"kai.scheduler/preemptibility": "sometimes"}),
                       namespace="osmo", default_queue=QUEUE)
    assert caught.value.code == "invalid_spec"


def test_explicit_priority_replaces_the_class() -> None:
    grouping = grouped(job(labels={"priorityClassName": "train"}), priority="HIGH")
    spec = grouping.groups[0].manifests.podgroup["spec"]
    assert (spec["priorityClassName"], spec["preemptibility"], grouping.priority) == \
        ("osmo-high", "non-preemptible", "HIGH")
    assert grouping.groups[0].manifests.pods[0]["spec"]["priorityClassName"] == "osmo-high"


def test_unknown_class_is_invalid_unless_supplied() -> None:
    with pytest.raises(WorkloadError) as caught:
        group_workload(job(labels={"priorityClassName": "gold"}), namespace="osmo",
                       default_queue=QUEUE)
    assert (caught.value.code, caught.value.errors) == \
        ("invalid_spec", {"priorityClassName": ["Unknown PriorityClass 'gold'."]})
    grouping = grouped(job(labels={"priorityClassName": "gold"}),
                       priority_classes={"gold": 150})
    assert grouping.priority == "HIGH"


def test_workload_priority_is_its_highest_group() -> None:
    items = {"apiVersion": "v1", "kind": "List", "items": [
        obj("v1", "Pod", "low", pod_spec()),
        obj("v1", "Pod", "hi", pod_spec(priorityClassName="osmo-high")),
    ]}
    assert grouped(items).priority == "HIGH"


def test_queue_label_on_owner_then_pod_then_default() -> None:
    owner = obj("example.com/v1", "Thing", "t", {}, labels={"kai.scheduler/queue": "q-owner"})
    pod = obj("v1", "Pod", "p", pod_spec(), owner=owner, labels={"kai.scheduler/queue": "q-pod"})
    assert group_pod(pod, [owner], default_queue="dflt").queue == "q-owner"
    del owner["metadata"]["labels"]
    assert group_pod(pod, [owner], default_queue="dflt").queue == "q-pod"
    del pod["metadata"]["labels"]
    assert group_pod(pod, [owner], default_queue="dflt").queue == "dflt"


def test_queue_label_must_stay_within_the_pools_queues() -> None:
    labelled = job(labels={"kai.scheduler/queue": "osmo-pool-osmo-other.shared"})
    with pytest.raises(WorkloadError) as caught:
        group_workload(labelled, namespace="osmo", default_queue=QUEUE, allowed_queues={QUEUE})
    assert caught.value.code == "invalid_spec"
    assert "osmo-pool-osmo-other.shared" in caught.value.detail
    same = grouped(job(labels={"kai.scheduler/queue": QUEUE}), allowed_queues={QUEUE})
    assert same.groups[0].manifests.podgroup["spec"]["queue"] == QUEUE
    free = grouped(labelled)  # no policy given: the label wins, as in KAI
    assert free.groups[0].manifests.podgroup["spec"]["queue"] == "osmo-pool-osmo-other.shared"
    assert free.groups[0].manifests.pods[0]["metadata"]["labels"]["kai.scheduler/queue"] == \
        "osmo-pool-osmo-other.shared"


def test_topology_annotations_become_the_constraint() -> None:
    annotated = job(annotations={"kai.scheduler/topology": "osmo-topology",
                                 "kai.scheduler/topology-required-placement": "zone",
                                 "kai.scheduler/topology-preferred-placement": "rack"})
    spec = grouped(annotated).groups[0].manifests.podgroup["spec"]
    assert spec["topologyConstraint"] == {"preferredTopologyLevel": "rack",
                                          "requiredTopologyLevel": "zone",
                                          "topology": "osmo-topology"}
    only_required = job(annotations={"kai.scheduler/topology-required-placement": "block"})
    spec = grouped(only_required).groups[0].manifests.podgroup["spec"]
    assert spec["topologyConstraint"] == {"requiredTopologyLevel": "block"}
    name_only = job(annotations={"kai.scheduler/topology": "osmo-topology"})
    assert "topologyConstraint" not in grouped(name_only).groups[0].manifests.podgroup["spec"]


def test_pod_annotations_give_the_topology_when_the_owner_has_none() -> None:
    owner = obj("example.com/v1", "Thing", "t", {})
    pod = obj("v1", "Pod", "p", pod_spec(), owner=owner,
              annotations={"kai.scheduler/topology-preferred-placement": "rack"})
    assert group_pod(pod, [owner]).topology.to_manifest() == {"preferredTopologyLevel": "rack"}


def test_unknown_topology_level_is_an_invalid_podgroup() -> None:
    bad = job(annotations={"kai.scheduler/topology-required-placement": "galaxy"})
    with pytest.raises(WorkloadError) as caught:
        group_workload(bad, namespace="osmo", default_queue=QUEUE)
    assert caught.value.code == "invalid_podgroup"
    assert list(caught.value.errors) == ["spec.topologyConstraint.requiredTopologyLevel"]


def external_list(podgroup_spec, pods=None):
    podgroup = obj("scheduling.run.ai/v2alpha2", "PodGroup", "ext", podgroup_spec)
    if pods is None:
        pods = [obj("v1", "Pod", f"ext-{i}", pod_spec(2),
                    labels={"kai.scheduler/subgroup-name": name},
                    annotations={"pod-group-name": "ext"})
                for i, name in enumerate(["a", "b"])]
    return {"apiVersion": "v1", "kind": "List", "items": [podgroup, *pods]}


def test_a_given_podgroup_list_is_taken_as_given_with_the_pools_queue() -> None:
    spec = {"queue": "someone-elses", "minSubGroup": 2,
            "subGroups": [{"name": "a", "minMember": 1}, {"name": "b", "minMember": 1}]}
    grouping = grouped(external_list(spec))
    (group,) = grouping.groups
    assert group.manifests.podgroup["spec"] == {
        "queue": QUEUE, "minSubGroup": 2, "priorityClassName": "train",
        "preemptibility": "preemptible",
        "subGroups": [{"name": "a", "minMember": 1}, {"name": "b", "minMember": 1}]}
    assert group.manifests.podgroup["metadata"]["labels"] == {"kai.scheduler/queue": QUEUE}
    assert group.pod_names == ["ext-0", "ext-1"]
    assert [p["metadata"]["labels"]["kai.scheduler/queue"] for p in group.manifests.pods] == \
        [QUEUE, QUEUE]
    assert (group.grouper, group.gpus, grouping.priority) == ("given", 4, "LOW")


def test_a_given_podgroup_that_breaks_the_rules_is_invalid_podgroup() -> None:
    spec = {"minMember": 2, "minSubGroup": 1,
            "subGroups": [{"name": "a", "minMember": 1}, {"name": "b", "minMember": 1}]}
    with pytest.raises(WorkloadError) as caught:
        group_workload(external_list(spec), namespace="osmo", default_queue=QUEUE)
    assert caught.value.code == "invalid_podgroup"
    assert list(caught.value.errors) == ["spec.minMember"]
    orphan_pods = [obj("v1", "Pod", "x", pod_spec(), annotations={"pod-group-name": "nope"})]
    with pytest.raises(WorkloadError) as caught:
        group_workload(external_list({"minMember": 1}, orphan_pods), namespace="osmo",
                       default_queue=QUEUE)
    assert caught.value.code == "invalid_podgroup"
    with pytest.raises(WorkloadError) as caught:
        group_workload(external_list({"minMember": 1}, []), namespace="osmo",
                       default_queue=QUEUE)
    assert caught.value.code == "invalid_podgroup"
    wrong_label = [obj("v1", "Pod", "x", pod_spec(), labels={"kai.scheduler/subgroup-name": "z"},
                       annotations={"pod-group-name": "ext"})]
    with pytest.raises(WorkloadError) as caught:
        group_workload(external_list({"minMember": 1}, wrong_label), namespace="osmo",
                       default_queue=QUEUE)
    assert caught.value.code == "invalid_podgroup"


def test_list_items_owned_by_other_items_are_walked_not_expanded() -> None:
    argo = obj("argoproj.io/v1alpha1", "Workflow", "wf", {},
               labels={"priorityClassName": "build"})
    pytorch = obj("kubeflow.org/v1", "PyTorchJob", "pt", {"pytorchReplicaSpecs": {
        "Master": {"replicas": 1, "template": template(1)},
        "Worker": {"replicas": 1, "template": template(1)}}}, owner=argo)
    grouping = grouped({"apiVersion": "v1", "kind": "List", "items": [argo, pytorch]})
    (group,) = grouping.groups
    assert (group.name, group.grouper, group.priority_class) == ("pg-pt", "pytorchjob", "build")
    assert group.pod_names == ["pt-master-0", "pt-worker-0"]

    job_with_pods = obj("batch/v1", "Job", "j", {"template": template(1)},
                        annotations={"kai.scheduler/batch-min-member": "2"})
    pods = [obj("v1", "Pod", f"j-own-{i}", pod_spec(), owner=job_with_pods) for i in range(2)]
    grouping = grouped([job_with_pods, *pods])
    assert grouping.pod_names == ["j-own-0", "j-own-1"]
    assert [group.name for group in grouping.groups] == ["pg-j"]


def test_malformed_workloads_are_invalid_spec() -> None:
    cases = [
        ("text", {"kind": ["Expected an object or a List."]}),
        ({"apiVersion": "v1", "kind": "List", "items": []},
         {"items": ["At least one item is required."]}),
        ({"kind": "Pod", "metadata": {"name": "x"}}, {"apiVersion": ["Required."]}),
        ({"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Pod",
                                                          "metadata": {}}]},
         {"items[0].metadata.name": ["Required."]}),
        ([obj("v1", "Pod", "same", pod_spec()), obj("v1", "Pod", "same", pod_spec())],
         {"items": ["Duplicate pod name 'same'."]}),
    ]
    for manifest, errors in cases:
        with pytest.raises(WorkloadError) as caught:
            group_workload(manifest, namespace="osmo", default_queue=QUEUE)
        assert (caught.value.code, caught.value.errors) == ("invalid_spec", errors), manifest


def test_pod_gpus_counts_requests_limits_and_init_containers() -> None:
    assert pod_gpus({"spec": {"containers": [
        {"resources": {"requests": {"nvidia.com/gpu": 2}}},
        {"resources": {"limits": {"nvidia.com/gpu": "3"}}}, {}]}}) == 5
    assert pod_gpus({"spec": {"containers": [], "initContainers": [
        {"resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}) == 4
    with pytest.raises(WorkloadError):
        pod_gpus({"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "0.5"}}}]}})


def test_podgroup_names_too_long_are_shortened_to_dns_labels() -> None:
    long_name = "x" * 70  # a valid Pod name (a DNS subdomain): kept as given
    grouping = grouped(obj("v1", "Pod", long_name, pod_spec()))
    (group,) = grouping.groups
    assert len(group.name) == 63 and group.name.startswith("pg-xxx")
    assert group.pod_names == [long_name]
    assert group.manifests.pods[0]["metadata"]["annotations"]["pod-group-name"] == group.name


def test_name_prefix_makes_every_name_unique_per_submission() -> None:
    grouping = grouped(job(annotations={"kai.scheduler/batch-min-member": "1"}),
                       name_prefix="train-7")
    (group,) = grouping.groups
    assert (group.name, group.pod_names) == ("train-7-pg-j", ["train-7-j-0"])
    assert group.manifests.pods[0]["metadata"]["annotations"]["pod-group-name"] == \
        "train-7-pg-j"
    # A given (external) PodGroup is taken as given: it and its pods keep their own names.
    spec = {"subGroups": [{"name": "a", "minMember": 1}, {"name": "b", "minMember": 1}]}
    given = grouped(external_list(spec), name_prefix="wl-1").groups[0]
    assert (given.name, given.pod_names) == ("ext", ["ext-0", "ext-1"])
    assert {p["metadata"]["annotations"]["pod-group-name"] for p in given.manifests.pods} == \
        {"ext"}
