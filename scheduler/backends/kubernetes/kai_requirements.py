"""What KAI placement needs of a cluster that its API server can tell: KAI's CRDs (through
discovery) and the OSMO PriorityClasses (by name). No model here: the backend leader
(``kai_readiness``) and the agent, which has no database, both ask."""

from __future__ import annotations

from scheduler.core.kai_names import (
    BINDREQUEST_API_VERSION,
    PODGROUP_API_VERSION,
    PRIORITY_CLASS_NAMES,
    QUEUE_API_VERSION,
    TOPOLOGY_API_VERSION,
)

from .client import Kube, api_errors, call, status_of

# (API version, resource) KAI placement cannot do without.
KAI_RESOURCES = ((PODGROUP_API_VERSION, "podgroups"), (QUEUE_API_VERSION, "queues"),
                 (TOPOLOGY_API_VERSION, "topologies"), (BINDREQUEST_API_VERSION,
                                                        "bindrequests"))
PRIORITY_CLASSES_PATH = "/apis/scheduling.k8s.io/v1/priorityclasses"


def crds_missing(kube: Kube) -> list[str]:
    missing = []
    for version, resource in KAI_RESOURCES:
        try:
            served = {r["name"] for r in call(kube, "GET", f"/apis/{version}")["resources"]}
        except api_errors() as exc:
            if status_of(exc) != 404:
                raise
            served = set()
        if resource not in served:
            missing.append(f"KAI's CRD {resource}.{version.split('/')[0]} ({version}) is not "
                           f"installed")
    return missing


def priority_classes_missing(kube: Kube) -> list[str]:
    missing = []
    for name in PRIORITY_CLASS_NAMES.values():
        try:
            call(kube, "GET", f"{PRIORITY_CLASSES_PATH}/{name}")
        except api_errors() as exc:
            if status_of(exc) == 403:  # an older ClusterRole: say so rather than guess
                names = ", ".join(PRIORITY_CLASS_NAMES.values())
                return ["the backend may not read PriorityClasses (its ClusterRole lacks get "
                        f"priorityclasses): cannot check {names}"]
            if status_of(exc) != 404:
                raise
            missing.append(f"PriorityClass {name} does not exist")
    return missing


def cluster_missing(kube: Kube) -> list[dict[str, str]]:
    """``[{requirement, detail}]`` of the CRDs and PriorityClasses (empty: all there)."""
    return ([{"requirement": "crd", "detail": d} for d in crds_missing(kube)]
            + [{"requirement": "priorityclass", "detail": d}
               for d in priority_classes_missing(kube)])
