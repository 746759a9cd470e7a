"""The embedded cluster's simulated tasks print real log lines into the task log store.

A task that starts running prints where it runs (node, GPU indices on that node) and its
command; every ``OSMO_SIM_LOG_INTERVAL`` seconds a progress line; when it ends, its exit code
(or why it was stopped). Written by the scheduling loop's leader after each cycle, through
``workflows.logstore`` (the same store the Kubernetes backend archives pods' logs into), so
``GET /api/workflow/{name}/logs`` behaves the same on both clusters.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from scheduler.backends.spec import embedded_specs
from scheduler.kai.workflow_manifests import stored_spec
from scheduler.models import Node
from workflows import logstore
from workflows.models import Task, TaskLogChunk, TaskStatus, Workflow
from workflows.selectors import gpu_holding_tasks

BATCH = 5000  # tasks looked at per step


@dataclass
class _Running:
    workflow_id: int
    name: str
    started_at: datetime
    seconds: int
    last_progress: datetime
    retry_id: int = 0  # its group's run: what it prints goes to that run's log


def _commands(workflow_ids: Iterable[int]) -> dict[int, dict[str, str]]:
    """Per workflow, spec task name → its command line, the specs read in one query."""
    commands = {}
    for workflow in Workflow.objects.filter(pk__in=list(workflow_ids)).only(
            "id", "spec", "rendered_spec"):
        try:
            spec = stored_spec(workflow)
        except Exception:  # noqa: BLE001 - a workload (manifests, no spec): no command to show
            commands[workflow.pk] = {}
            continue
        commands[workflow.pk] = {task.name: shlex.join([*task.command, *task.args])
                                 for task in spec.tasks}
    return commands


def _gpu_indices(task_id: int, holders: list[tuple[int, int]]) -> str:
    """The task's GPUs among its node's ``holders`` (id, GPUs) in task order, counted from 0
    ("0-3", "4", "none")."""
    offset = 0
    for pk, gpus in holders:
        if pk == task_id:
            if not gpus:
                return "none"
            return f"{offset}" if gpus == 1 else f"{offset}-{offset + gpus - 1}"
        offset += gpus
    return "none"


class SimulatedOutput:
    """What the simulated tasks print; one per scheduling loop (its leader)."""

    def __init__(self):
        self.running: dict[int, _Running] = {}
        self.commands: dict[int, dict[str, str]] = {}  # of the running tasks' workflows

    def step(self, now: datetime | None = None) -> int:
        """Write the lines due now; returns how many were written."""
        now = now or timezone.now()
        # Only the embedded backends' tasks: one on a real cluster's node prints its own log.
        simulated = Node.objects.filter(backend__in=[spec.name for spec in embedded_specs()])
        rows = list(gpu_holding_tasks().filter(status=TaskStatus.RUNNING,
                                               node_name__in=simulated.values("name"))
                    .order_by("id")
                    .values_list("id", "workflow_id", "name", "spec_task", "node_name", "gpus",
                                 "started_at", "run_seconds", "retry_id")[:BATCH])
        lines: list[tuple[int, int, str, int]] = []
        runs = {row[0]: row[8] for row in rows}
        current = set(runs)
        # A task whose group ran again since the last step ended its earlier run first.
        rerun = [pk for pk, running in self.running.items()
                 if pk in runs and runs[pk] != running.retry_id]
        if rerun:
            lines += self._ended(rerun, now)
        new = [row for row in rows if row[0] not in self.running]
        if new:
            lines += self._started(new, now)
        interval = settings.OSMO_SIM_LOG_INTERVAL
        for pk, running in self.running.items():
            if pk in current and interval > 0 and \
                    (now - running.last_progress).total_seconds() >= interval:
                running.last_progress = now
                elapsed = int((now - running.started_at).total_seconds())
                share = min(99, 100 * elapsed // running.seconds) if running.seconds else 0
                lines.append((running.workflow_id, pk, logstore.format_line(
                    now, running.name, f"progress: {share}% ({elapsed} s elapsed)"),
                    running.retry_id))
        ended = [pk for pk in self.running if pk not in current]
        if ended:
            lines += self._ended(ended, now)
        logstore.log_append_lines(lines)
        return len(lines)

    def _started(self, rows, now: datetime) -> list[tuple[int, int, str, int]]:
        ids = [row[0] for row in rows]
        printed = set(TaskLogChunk.objects.filter(task_id__in=ids).values_list("task_id",
                                                                               "retry_id"))
        nodes = {row[4] for row in rows}
        holders: dict[str, list[tuple[int, int]]] = {}
        for pk, node, gpus in (gpu_holding_tasks().filter(node_name__in=nodes).order_by("id")
                               .values_list("id", "node_name", "gpus")):
            holders.setdefault(node, []).append((pk, gpus))
        self.commands.update(_commands({row[1] for row in rows if (row[0], row[8]) not in printed}
                                       - self.commands.keys()))
        lines = []
        for pk, workflow_id, name, spec_task, node, gpus, started, run_seconds, retry in rows:
            seconds = run_seconds or settings.OSMO_SIM_TASK_SECONDS
            self.running[pk] = _Running(workflow_id, name, started, seconds, started, retry)
            if (pk, retry) in printed:
                continue  # printed before this process started
            command = self.commands.get(workflow_id, {}).get(spec_task, "")
            for text in (f"started on node {node} with GPUs "
                         f"{_gpu_indices(pk, holders.get(node, []))} ({gpus} GPU(s))",
                         f"$ {command}" if command else "running its pod's command"):
                lines.append((workflow_id, pk, logstore.format_line(started, name, text),
                              retry))
        return lines

    def _ended(self, ids: list[int], now: datetime) -> list[tuple[int, int, str, int]]:
        lines = []
        for pk, status, exit_code, reason, finished in Task.objects.filter(
                pk__in=ids).values_list("id", "status", "exit_code", "reason", "finished_at"):
            running = self.running[pk]
            if status == TaskStatus.COMPLETED:
                texts = ["progress: 100%", f"exited with code {exit_code or 0}"]
            elif status in (TaskStatus.RUNNING, TaskStatus.SCHEDULING, TaskStatus.WAITING):
                texts = [f"stopped ({reason or 'rescheduled'}); it will start again"]
            else:
                texts = [f"terminated: {status} ({reason or 'no reason given'})"]
            lines += [(running.workflow_id, pk, logstore.format_line(finished or now,
                                                                     running.name, text),
                       running.retry_id) for text in texts]
        for pk in ids:
            self.running.pop(pk, None)
        alive = {running.workflow_id for running in self.running.values()}
        self.commands = {pk: value for pk, value in self.commands.items() if pk in alive}
        return lines
