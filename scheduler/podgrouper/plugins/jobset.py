"""JobSet: one PodGroup ``pg-{jobset}``, one leaf subgroup per replicatedJob, class ``train``.

A replicatedJob's subgroup needs all its pods (replicas × pods per Job); the root minMember is
their sum. (``kai.scheduler/batch-min-member`` is a Job knob here; on a JobSet it is ignored.)
Expanded as the controller does: Jobs ``{jobset}-{replicatedJob}-{index}`` own the pods, so the
owner walk goes pod → Job → JobSet and the JobSet decides.
"""

from __future__ import annotations

from ..model import SubGroupSpec, WorkloadError
from ..registry import (
    Grouper,
    int_field,
    labels_of,
    make_owner,
    make_pod,
    name_of,
    nested,
    podgroup_name_for,
    register,
)
from .job import JOB_NAME_LABEL, pods_per_job

JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"


def _replicated_jobs(jobset):
    jobs = nested(jobset, "spec", "replicatedJobs")
    if not isinstance(jobs, list) or not jobs:
        raise WorkloadError("invalid_spec", f"JobSet {name_of(jobset)} has no replicatedJobs",
                            {"spec.replicatedJobs": ["Required, at least one."]})
    out = []
    for index, job in enumerate(jobs):
        path = f"spec.replicatedJobs[{index}]"
        replicas = job.get("replicas")
        replicas = 1 if replicas is None else int_field(replicas, f"{path}.replicas")
        out.append((str(job.get("name", "")), replicas,
                    pods_per_job(nested(job, "template", "spec") or {}), job))
    return out


@register("jobset.x-k8s.io", "JobSet")
class JobSetGrouper(Grouper):
    name = "jobset"

    def metadata(self, top, pod, chain):
        subgroups = tuple(SubGroupSpec(name, min_member=max(1, replicas * per_job))
                          for name, replicas, per_job, _ in _replicated_jobs(top))
        return self.meta(top, name=podgroup_name_for(name_of(top)),
                         min_member=sum(s.min_member for s in subgroups),
                         subgroups=subgroups,
                         subgroup=labels_of(pod).get(REPLICATED_JOB_LABEL))

    def expand(self, owner):
        objects = []
        for name, replicas, per_job, job in _replicated_jobs(owner):
            template = nested(job, "template", "spec", "template")
            for job_index in range(replicas):
                labels = {JOBSET_LABEL: name_of(owner), REPLICATED_JOB_LABEL: name,
                          JOB_INDEX_LABEL: str(job_index)}
                child = make_owner(owner, "batch/v1", "Job",
                                   f"{name_of(owner)}-{name}-{job_index}", labels=labels)
                objects.append(child)
                for pod_index in range(per_job):
                    objects.append(make_pod(child, template,
                                            f"{name_of(child)}-{pod_index}",
                                            labels={**labels, JOB_NAME_LABEL: name_of(child)}))
        return objects
