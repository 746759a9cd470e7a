"""Each plugin's defaults (SCHEDULING.md "Pod grouper"), through group_workload."""

from __future__ import annotations

import pytest

from scheduler.podgrouper import WorkloadError, group_workload

from .helpers import QUEUE, assert_valid, obj, pod_spec, template


def grouped(manifest, **kwargs):
    grouping = group_workload(manifest, namespace="osmo", default_queue=QUEUE, **kwargs)
    assert_valid(grouping)
    return grouping


def spec_of(group) -> dict:
    return group.manifests.podgroup["spec"]


def subgroup_labels(group) -> list[str]:
    return [p["metadata"]["labels"]["kai.scheduler/subgroup-name"] for p in group.manifests.pods]


def test_bare_pod() -> None:
    grouping = grouped(obj("v1", "Pod", "solo", pod_spec(2)))
    (group,) = grouping.groups
    assert group.manifests.podgroup == {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg-solo", "namespace": "osmo",
                     "labels": {"kai.scheduler/queue": QUEUE},
                     "annotations": {"osmo/owner-kind": "Pod", "osmo/owner-name": "solo",
                                     "osmo/grouper": "pod"}},
        "spec": {"queue": QUEUE, "priorityClassName": "train", "preemptibility": "preemptible",
                 "minMember": 1},
    }
    (pod,) = group.manifests.pods
    assert pod["metadata"] == {
        "name": "solo", "namespace": "osmo",
        "labels": {"kai.scheduler/queue": QUEUE, "kai.scheduler/subgroup-name": "default"},
        "annotations": {"pod-group-name": "pg-solo", "kai.scheduler/skip-podgrouper": "true",
                        "osmo/owner-kind": "Pod", "osmo/owner-name": "solo"},
    }
    assert (pod["spec"]["schedulerName"], pod["spec"]["priorityClassName"]) == \
        ("kai-scheduler", "train")
    assert (grouping.priority, grouping.gpus, group.gpus) == ("LOW", 2, 2)


def test_job_without_min_member_is_one_podgroup_per_pod() -> None:
    job = obj("batch/v1", "Job", "etl", {"parallelism": 3, "completions": 10,
                                         "template": template(0)})
    grouping = grouped(job)
    assert [group.name for group in grouping.groups] == ["pg-etl-0", "pg-etl-1", "pg-etl-2"]
    assert grouping.pod_names == ["etl-0", "etl-1", "etl-2"]
    assert {spec_of(g)["minMember"] for g in grouping.groups} == {1}
    assert {spec_of(g)["priorityClassName"] for g in grouping.groups} == {"train"}
    assert grouping.groups[0].manifests.pods[0]["metadata"]["labels"][
        "batch.kubernetes.io/job-name"] == "etl"


def test_job_batch_min_member_makes_one_gang() -> None:
    job = obj("batch/v1", "Job", "hpo", {"parallelism": 6, "template": template(1)},
              annotations={"kai.scheduler/batch-min-member": "2"})
    grouping = grouped(job)
    (group,) = grouping.groups
    assert (group.name, spec_of(group)["minMember"], len(group.pod_names), group.gpus) == \
        ("pg-hpo", 2, 6, 6)
    job["metadata"]["annotations"]["kai.scheduler/batch-min-member"] = "zero"
    with pytest.raises(WorkloadError) as caught:
        group_workload(job, namespace="osmo", default_queue=QUEUE)
    assert caught.value.code == "invalid_spec"
    assert caught.value.errors == {
        "metadata.annotations.kai.scheduler/batch-min-member": ["Must be ≥ 1."]}


def test_job_pod_count_is_min_of_parallelism_and_completions() -> None:
    job = obj("batch/v1", "Job", "one", {"completions": 1, "parallelism": 4,
                                         "template": template(0)})
    assert grouped(job).pod_names == ["one-0"]
    assert grouped(obj("batch/v1", "Job", "dflt", {"template": template(0)})).pod_names == \
        ["dflt-0"]


def test_deployment_is_one_inference_podgroup_per_pod() -> None:
    deployment = obj("apps/v1", "Deployment", "serve", {"replicas": 2, "template": template(1)})
    grouping = grouped(deployment)
    assert len(grouping.groups) == 2
    for group in grouping.groups:
        assert spec_of(group) == {"queue": QUEUE, "priorityClassName": "inference",
                                  "preemptibility": "non-preemptible", "minMember": 1}
        assert group.manifests.podgroup["metadata"]["annotations"]["osmo/owner-kind"] == \
            "Deployment"
    first = grouping.pod_names[0]
    assert first.startswith("serve-") and first.endswith("-0")
    assert [group.name for group in grouping.groups][0] == f"pg-{first}"
    assert grouping.priority == "HIGH"


def mpijob(**spec_extra):
    specs = {"Launcher": {"replicas": 1, "template": template(0)},
             "Worker": {"replicas": 4, "template": template(8)}}
    return obj("kubeflow.org/v2beta1", "MPIJob", "mpi", {"mpiReplicaSpecs": specs,
                                                         **spec_extra})


def test_mpijob_counts_workers_but_keeps_the_launcher_in_the_group() -> None:
    (group,) = grouped(mpijob()).groups
    assert spec_of(group)["minMember"] == 4
    assert group.pod_names == ["mpi-launcher", "mpi-worker-0", "mpi-worker-1", "mpi-worker-2",
                               "mpi-worker-3"]
    assert set(subgroup_labels(group)) == {"default"}
    assert group.gpus == 32
    assert "subGroups" not in spec_of(group)


def test_mpijob_min_available_and_launcher_as_worker() -> None:
    policy = {"runPolicy": {"schedulingPolicy": {"minAvailable": 2}}}
    assert spec_of(grouped(mpijob(**policy)).groups[0])["minMember"] == 2
    assert spec_of(grouped(mpijob(runLauncherAsWorker=True)).groups[0])["minMember"] == 5


def pytorchjob(workers=3, **spec_extra):
    specs = {"Master": {"replicas": 1, "template": template(8)},
             "Worker": {"replicas": workers, "template": template(8)}}
    return obj("kubeflow.org/v1", "PyTorchJob", "pt", {"pytorchReplicaSpecs": specs,
                                                      **spec_extra})


def test_pytorchjob_master_and_worker_subgroups() -> None:
    (group,) = grouped(pytorchjob()).groups
    assert spec_of(group)["minMember"] == 4
    assert spec_of(group)["subGroups"] == [{"name": "master", "minMember": 1},
                                           {"name": "worker", "minMember": 3}]
    assert subgroup_labels(group) == ["master", "worker", "worker", "worker"]
    assert group.pod_names == ["pt-master-0", "pt-worker-0", "pt-worker-1", "pt-worker-2"]


def test_pytorchjob_min_available_then_elastic_min_replicas() -> None:
    elastic = grouped(pytorchjob(workers=7, elasticPolicy={"minReplicas": 3})).groups[0]
    assert spec_of(elastic)["subGroups"] == [{"name": "master", "minMember": 1},
                                             {"name": "worker", "minMember": 2}]
    assert spec_of(elastic)["minMember"] == 3
    both = pytorchjob(workers=7, elasticPolicy={"minReplicas": 3},
                      runPolicy={"schedulingPolicy": {"minAvailable": 5}})
    assert spec_of(grouped(both).groups[0])["subGroups"][1] == {"name": "worker",
                                                                "minMember": 4}
    tiny = grouped(pytorchjob(workers=2, runPolicy={"schedulingPolicy": {"minAvailable": 1}}))
    assert spec_of(tiny.groups[0])["subGroups"] == [{"name": "master", "minMember": 1},
                                                    {"name": "worker", "minMember": 1}]


def test_leaderworkerset_is_one_gang_per_group() -> None:
    lws = obj("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "llm", {
        "replicas": 2,
        "leaderWorkerTemplate": {"size": 4, "leaderTemplate": template(0),
                                 "workerTemplate": template(8)},
    })
    grouping = grouped(lws)
    assert [group.name for group in grouping.groups] == ["pg-llm-0", "pg-llm-1"]
    first = grouping.groups[0]
    assert spec_of(first)["minMember"] == 4
    assert spec_of(first)["subGroups"] == [{"name": "leader", "minMember": 1},
                                           {"name": "workers", "minMember": 3}]
    assert first.pod_names == ["llm-0", "llm-0-1", "llm-0-2", "llm-0-3"]
    assert subgroup_labels(first) == ["leader", "workers", "workers", "workers"]
    assert (first.gpus, grouping.gpus) == (24, 48)
    single = obj("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "one",
                 {"leaderWorkerTemplate": {"workerTemplate": template(1)}})
    assert spec_of(grouped(single).groups[0])["subGroups"] == [{"name": "leader",
                                                                "minMember": 1}]


def test_jobset_has_a_subgroup_per_replicated_job() -> None:
    jobset = obj("jobset.x-k8s.io/v1alpha2", "JobSet", "js", {"replicatedJobs": [
        {"name": "driver", "template": {"spec": {"template": template(0)}}},
        {"name": "workers", "replicas": 2,
         "template": {"spec": {"parallelism": 2, "template": template(4)}}},
    ]})
    (group,) = grouped(jobset).groups
    assert spec_of(group)["minMember"] == 5
    assert spec_of(group)["subGroups"] == [{"name": "driver", "minMember": 1},
                                           {"name": "workers", "minMember": 4}]
    assert group.pod_names == ["js-driver-0-0", "js-workers-0-0", "js-workers-0-1",
                               "js-workers-1-0", "js-workers-1-1"]
    assert subgroup_labels(group) == ["driver"] + ["workers"] * 4
    assert group.manifests.podgroup["metadata"]["annotations"]["osmo/owner-kind"] == "JobSet"


def test_grove_podcliqueset_cliques_are_subgroups() -> None:
    pcs = obj("grove.io/v1alpha1", "PodCliqueSet", "dis", {"replicas": 2, "template": {
        "cliques": [
            {"name": "prefill", "spec": {"replicas": 3, "minAvailable": 2,
                                         "podSpec": pod_spec(2)}},
            {"name": "decode", "spec": {"replicas": 2, "podSpec": pod_spec(1)}},
        ]}})
    grouping = grouped(pcs)
    assert [group.name for group in grouping.groups] == ["pg-dis-0", "pg-dis-1"]
    first = grouping.groups[0]
    assert spec_of(first)["minMember"] == 4
    assert spec_of(first)["subGroups"] == [{"name": "prefill", "minMember": 2},
                                           {"name": "decode", "minMember": 2}]
    assert first.pod_names == ["dis-0-prefill-0", "dis-0-prefill-1", "dis-0-prefill-2",
                               "dis-0-decode-0", "dis-0-decode-1"]
    assert subgroup_labels(first) == ["prefill"] * 3 + ["decode"] * 2
    assert first.gpus == 8


def test_unknown_kind_with_a_pod_template_uses_the_default_grouper() -> None:
    custom = obj("example.com/v1", "Trainer", "tr", {"replicas": 3, "template": template(1)})
    (group,) = grouped(custom).groups
    assert (group.name, spec_of(group)["minMember"], spec_of(group)["priorityClassName"]) == \
        ("pg-tr", 1, "train")
    assert group.pod_names == ["tr-0", "tr-1", "tr-2"]
    with pytest.raises(WorkloadError) as caught:
        group_workload(obj("example.com/v1", "Opaque", "x", {}), namespace="osmo",
                       default_queue=QUEUE)
    assert (caught.value.code, caught.value.errors) == \
        ("invalid_spec", {"kind": ["Unsupported kind 'Opaque'."]})


def test_replicaset_and_statefulset_expand_by_replicas() -> None:
    stateful = obj("apps/v1", "StatefulSet", "db", {"replicas": 2, "template": template(0)})
    (group,) = grouped(stateful).groups
    assert (group.name, group.pod_names) == ("pg-db", ["db-0", "db-1"])
