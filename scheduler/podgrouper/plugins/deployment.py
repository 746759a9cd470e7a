"""apps/v1 Deployment: one PodGroup per pod (minMember 1), class ``inference``.

Expanded as Kubernetes does: a ReplicaSet ``{deployment}-{template hash}`` owns the pods, so
the owner walk goes pod → ReplicaSet → Deployment.
"""

from __future__ import annotations

import hashlib
import json

from ..model import INFERENCE
from ..registry import (
    Grouper,
    int_field,
    make_owner,
    make_pod,
    name_of,
    nested,
    podgroup_name_for,
    register,
)

TEMPLATE_HASH_LABEL = "pod-template-hash"


@register("apps", "Deployment")
class DeploymentGrouper(Grouper):
    name = "deployment"
    default_priority_class = INFERENCE

    def metadata(self, top, pod, chain):
        return self.meta(top, name=podgroup_name_for(name_of(pod)), min_member=1)

    def expand(self, owner):
        spec = nested(owner, "spec") or {}
        replicas = spec.get("replicas")
        count = 1 if replicas is None else int_field(replicas, "spec.replicas")
        template = spec.get("template") or {}
        digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]
        replica_set = make_owner(owner, "apps/v1", "ReplicaSet", f"{name_of(owner)}-{digest}",
                                 labels={TEMPLATE_HASH_LABEL: digest})
        pods = [make_pod(owner, template, f"{name_of(replica_set)}-{index}",
                         labels={TEMPLATE_HASH_LABEL: digest}, owner_ref=replica_set)
                for index in range(count)]
        return [replica_set, *pods]
