"""Kubeflow MPIJob (v1, v2beta1), class ``train``: one PodGroup, no subgroups.

minMember = ``spec.runPolicy.schedulingPolicy.minAvailable`` (v2beta1; v1's
``spec.schedulingPolicy.minAvailable`` too), else all replicas minus the launcher. The launcher
pod belongs to the PodGroup but not to minMember — unless ``runLauncherAsWorker: true``, where
the launcher is a worker too and counts.
"""

from __future__ import annotations

from ..registry import (
    Grouper,
    int_field,
    make_pod,
    name_of,
    nested,
    podgroup_name_for,
    register,
    replica_count,
)

ROLE_LABEL = "training.kubeflow.org/job-role"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"


def _replicas(specs, role: str) -> int:
    return replica_count(specs, role, "spec.mpiReplicaSpecs")


@register("kubeflow.org", "MPIJob")
class MPIJobGrouper(Grouper):
    name = "mpijob"

    def metadata(self, top, pod, chain):
        spec = nested(top, "spec") or {}
        specs = spec.get("mpiReplicaSpecs") or {}
        min_available = nested(spec, "runPolicy", "schedulingPolicy", "minAvailable")
        if min_available is None:
            min_available = nested(spec, "schedulingPolicy", "minAvailable")
        if min_available is not None:
            min_member = int_field(min_available, "spec.runPolicy.schedulingPolicy.minAvailable",
                                   minimum=1)
        else:
            min_member = _replicas(specs, "Worker")
            if spec.get("runLauncherAsWorker"):
                min_member += _replicas(specs, "Launcher")
            min_member = max(1, min_member)
        return self.meta(top, name=podgroup_name_for(name_of(top)), min_member=min_member)

    def expand(self, owner):
        specs = nested(owner, "spec", "mpiReplicaSpecs") or {}
        pods = []
        for role in ("Launcher", "Worker"):
            count = _replicas(specs, role)
            for index in range(count):
                suffix = "launcher" if role == "Launcher" and count == 1 else \
                    f"{role.lower()}-{index}"
                pods.append(make_pod(owner, (specs.get(role) or {}).get("template"),
                                     f"{name_of(owner)}-{suffix}",
                                     labels={ROLE_LABEL: role.lower(),
                                             REPLICA_TYPE_LABEL: role.lower(),
                                             REPLICA_INDEX_LABEL: str(index)}))
        return pods
