"""The running tasks of a backend whose logs someone reads now (a ``TaskLogInterest`` the web
renews), as the agent is told them with each work poll: the pod, and where the service's copy
of its log ends (``since_ns``). The agent reads those pods' new lines every few seconds and
sends them as ``pod_logs`` messages, which keep only lines newer than those stored — as the
in-process backend's ``copy_wanted`` does — so a line sent twice is kept once."""

from __future__ import annotations

from workflows import logstore

from ..kubernetes.pod_logs import task_pod_name, tasks_read_live

MAX_FOLLOWED = 100  # pods one agent follows at once (the oldest readers' first)


def logs_wanted(backend_name: str) -> list[dict]:
    """``[{task: [workflow, task], pod, since_ns}]`` of this backend's tasks read live (two
    queries, whatever their number: the long-poll asks every step)."""
    tasks = tasks_read_live(group__backend=backend_name, limit=MAX_FOLLOWED)
    cursors = logstore.log_cursors((task.pk, task.retry_id) for task in tasks)
    return [{"task": [task.workflow.name, task.name], "pod": task_pod_name(task),
             "since_ns": cursors[(task.pk, task.retry_id)]} for task in tasks]
