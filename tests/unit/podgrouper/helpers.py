"""Manifests and checks shared by the pod-grouper tests."""

from __future__ import annotations

from pathlib import Path

from scheduler.core.podgroup_validation import validate_podgroup
from scheduler.kai.crd_validation import validate_manifest
from tests.shared_data import kai_schemas

REPO = Path(__file__).resolve().parents[3]
QUEUE = "osmo-pool-osmo-team.shared"


def pod_spec(gpus: int = 1, **extra) -> dict:
    container = {"name": "main", "image": "nvcr.io/nvidia/pytorch:24.01",
                 "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
    return {"containers": [container], **extra}


def template(gpus: int = 1, labels: dict | None = None, **extra) -> dict:
    return {"metadata": {"labels": dict(labels or {})}, "spec": pod_spec(gpus, **extra)}


def obj(api_version: str, kind: str, name: str, spec: dict | None = None, *,
        labels: dict | None = None, annotations: dict | None = None,
        owner: dict | None = None) -> dict:
    metadata: dict = {"name": name}
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    if owner is not None:
        metadata["ownerReferences"] = [{"apiVersion": owner["apiVersion"],
                                        "kind": owner["kind"],
                                        "name": owner["metadata"]["name"], "controller": True}]
    out = {"apiVersion": api_version, "kind": kind, "metadata": metadata}
    if spec is not None:
        out["spec"] = spec
    return out


def assert_valid(grouping) -> None:
    """Every PodGroup passes its CRD schema and, with its pods, the webhook rules."""
    for group in grouping.groups:
        podgroup = group.manifests.podgroup
        assert validate_manifest(podgroup, schemas=kai_schemas()) == [], podgroup
        result = validate_podgroup(podgroup, group.manifests.pods)
        assert result.errors == (), result.errors
