"""batch/v1 Job, class ``train``.

As KAI: without ``kai.scheduler/batch-min-member`` every pod is its own PodGroup (minMember 1:
a plain Job does not need a gang); with it, one PodGroup for the whole Job whose minMember is
the annotation. Pods: min(parallelism, completions), parallelism default 1.
"""

from __future__ import annotations

from ..model import MIN_MEMBER_ANNOTATION
from ..registry import (
    Grouper,
    annotations_of,
    int_field,
    make_pod,
    name_of,
    nested,
    podgroup_name_for,
    register,
)

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def pods_per_job(spec) -> int:
    parallelism = spec.get("parallelism")
    parallelism = 1 if parallelism is None else int_field(parallelism, "spec.parallelism")
    completions = spec.get("completions")
    if completions is None:
        return parallelism
    return min(parallelism, int_field(completions, "spec.completions"))


@register("batch", "Job")
class JobGrouper(Grouper):
    name = "job"

    def metadata(self, top, pod, chain):
        override = annotations_of(top).get(MIN_MEMBER_ANNOTATION)
        if override is None:
            return self.meta(top, name=podgroup_name_for(name_of(pod)), min_member=1)
        min_member = int_field(override, f"metadata.annotations.{MIN_MEMBER_ANNOTATION}",
                               minimum=1)
        return self.meta(top, name=podgroup_name_for(name_of(top)), min_member=min_member)

    def expand(self, owner):
        spec = nested(owner, "spec") or {}
        return [make_pod(owner, spec.get("template"), f"{name_of(owner)}-{index}",
                         labels={JOB_NAME_LABEL: name_of(owner)})
                for index in range(pods_per_job(spec))]
