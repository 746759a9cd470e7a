"""The OpenAPI document's tags: each operation is filed under its area, found from its path
(first rule that matches), so `/api/docs` groups them as a reader looks for them."""

from __future__ import annotations

import re

# (tag, what it holds, path pattern); order matters: the first match wins.
AREAS: tuple[tuple[str, str, str], ...] = (
    ("logs", "Task logs and events of a workflow",
     r"^/api/workflow/[^/]+/(logs|error_logs|events)$"),
    ("tasks", "Tasks across workflows, and status reports", r"^/api/(task$|workflow/[^/]+/task/)"),
    ("kai", "KAI PodGroups, Queues and manifests",
     r"^(/api/kai/|/api/podgroups/|/webhooks/|/api/workflow/[^/]+/kai$)"),
    ("workflows", "Submit, list, explain and cancel workflows and workloads",
     r"^/api/(workflow|tag$|pool/[^/]+/(workflow|workload))"),
    ("pools", "Pools, subpools and their quota", r"^/api/(configs/pool|pool_quota$|pool$)"),
    ("cluster", "Nodes, the Topology and the resources pools see", r"^/api/(cluster|resources)"),
    ("backends", "The clusters that run pods, their status and figures",
     r"^/api/configs/backend"),
    ("configs", "Config history of pools and backends: revisions, diffs, rollbacks",
     r"^/api/configs/(history|diff)"),
    ("scheduler", "Scheduling cycles and their status", r"^/api/scheduler/"),
    ("credentials", "Your registry, data and generic credentials (values never returned)",
     r"^/api/credentials"),
    ("apps", "Saved, versioned workflow specs", r"^/api/app(/|$)"),
    ("auth", "Access tokens, users and login tokens", r"^/api/auth/"),
    ("profile", "Who the caller is and their settings", r"^/api/(whoami|profile/)"),
    ("service", "Health, version and the service's configuration",
     r"^/api/(health|version|configs/service)$"),
)
_RULES = tuple((tag, re.compile(pattern)) for tag, _, pattern in AREAS)
TAGS = [{"name": tag, "description": description} for tag, description, _ in AREAS]


def tag_of(path: str) -> str | None:
    return next((tag for tag, rule in _RULES if rule.search(path)), None)


def tag_by_area(result: dict, generator, request, public) -> dict:
    """drf-spectacular postprocessing hook: every operation's tags from its path."""
    for path, operations in result.get("paths", {}).items():
        tag = tag_of(path)
        if tag is None:
            continue
        for operation in operations.values():
            if isinstance(operation, dict):
                operation["tags"] = [tag]
    return result
