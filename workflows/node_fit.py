"""Admission's node check: a task whose one pod needs more GPUs than any node its platform
selects has can never be placed, at any priority (LOW only skips the quota checks), so it is
refused at submit instead of pending for ever. A pool whose platforms select no schedulable
node yet (nodes not registered, all cordoned) is not judged: nodes may still come.

The largest node of a selector is kept for a few seconds, so a submission costs no statement
more; a refusal is decided on a fresh read only, so a stale entry can at worst let a pod in
that then waits, as it did before this check."""

from __future__ import annotations

import time
from collections.abc import Mapping

from osmo.errors import OsmoError
from pools.models import Pool

from . import ports
from .spec import WorkflowSpec

KEPT_SECONDS = 5.0
_largest: dict[frozenset, tuple[float, int | None]] = {}


def forget() -> None:
    """Drop the kept figures (tests, after they change the nodes)."""
    _largest.clear()


def _largest_node(selector: Mapping[str, str], *, fresh: bool) -> int | None:
    key, now = frozenset(selector.items()), time.monotonic()
    kept = _largest.get(key)
    if fresh or kept is None or now - kept[0] > KEPT_SECONDS:
        kept = now, ports.scheduling().largest_node_gpus(selector)
        _largest[key] = kept
    return kept[1]


def check_tasks_fit_a_node(pool: Pool, spec: WorkflowSpec) -> None:
    """400 `invalid_spec`, at each such task's path, before any lock is taken."""
    settings_pool = pool.parent if pool.is_subpool else pool
    platforms = settings_pool.platforms or {}
    # One aggregate per platform, for the platform's largest pod only.
    largest_pod: dict[str | None, int] = {}
    for group in spec.groups:
        for task in group.tasks:
            if task.resource.gpus > largest_pod.get(task.platform, 0):
                largest_pod[task.platform] = task.resource.gpus
    largest_node: dict[str | None, int | None] = {}
    for platform, pod in largest_pod.items():
        selector = (platforms.get(platform) or {}).get("node_selector") or {}
        node = _largest_node(selector, fresh=False)
        if node is not None and pod > node:
            node = _largest_node(selector, fresh=True)  # refuse on what the nodes are now
        largest_node[platform] = node
    errors: dict[str, list[str]] = {}
    for group in spec.groups:
        for task in group.tasks:
            node = largest_node.get(task.platform)
            if node is not None and task.resource.gpus > node:
                where = f"platform '{task.platform}' of " if task.platform else ""
                errors[f"{task.path}.resource"] = [
                    f"one pod of task '{task.name}' needs {task.resource.gpus} GPUs, but the "
                    f"largest node of {where}pool '{settings_pool.name}' has {node}: it could "
                    f"never run at any priority; split it into tasks of at most {node} GPUs"]
    if errors:
        raise OsmoError("invalid_spec", "The workflow can never be placed: " + "; ".join(
            f"{path}: {messages[0]}" for path, messages in list(errors.items())[:3]),
            errors=errors)
