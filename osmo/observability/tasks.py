"""Background work seen from every process: tasks sent (the web tier, beat) and tasks run
(the Celery worker), by task name (the registered tasks: a bounded set) and outcome."""

from __future__ import annotations

from celery import signals
from prometheus_client import Counter

from .metrics import enabled

TASKS_SENT = Counter("osmo_background_tasks_sent_total",
                     "Background tasks sent to the broker, by task.", ["task"])
TASKS_RUN = Counter("osmo_background_tasks_total",
                    "Background tasks the worker ran, by task and state (SUCCESS, FAILURE, "
                    "RETRY...).", ["task", "state"])


@signals.after_task_publish.connect
def _sent(sender=None, **_kwargs) -> None:
    if enabled() and sender:
        TASKS_SENT.labels(sender).inc()


@signals.task_postrun.connect
def _ran(task=None, state=None, **_kwargs) -> None:
    if enabled() and task is not None:
        TASKS_RUN.labels(task.name, state or "UNKNOWN").inc()
