"""What the apps announce to the apps above them: typed events, delivered after commit.

The apps depend in one direction — `osmo` ← `pools` ← `workflows` ← `scheduler` ← `dashboard` —
so a lower app never calls a higher one. When a higher app must act on what happened below (a
pool changed → the KAI queues follow; a workflow admitted → the Kubernetes backend wakes), the
lower app publishes one of the events below and the higher app subscribes to it in its
`AppConfig.ready()`. Where a lower app must READ what a higher app owns, it declares a port
instead (`osmo.ports`).

- `PoolChanged(pool)` — by `pools.services`, when a pool or subpool was created, changed,
  deleted or archived. `scheduler` reconciles the KAI Queues (`scheduler.tasks`, when a cluster
  is configured).
- `PoolArchived(pool)` — by `pools.services`, when a pool or subpool is ARCHIVED. `scheduler`:
  the Kubernetes backend sweeps what is still labelled with it.
- `WorkflowAdmitted(workflow, pool)` — by `workflows.admission`, when a submission (workflow or
  workload) was admitted. `scheduler`: the Kubernetes backend wakes and dispatches it now.
- `WorkflowsCanceled(workflows)` — by `workflows.lifecycle`, when workflows were canceled (by a
  user, or by a subpool's delete). `scheduler`: the Kubernetes backend wakes and deletes their
  pods now.

Delivery: after the publishing transaction commits (at once outside one; never when it rolls
back), to each subscriber in the order they subscribed. A subscriber that fails is logged and the
others still run: the request that published has committed and must not fail. Each subscriber
only hastens what a periodic pass does anyway (the KAI sync's beat run, the backend's poll), so a
lost delivery costs time, never work. The bus is in-process: a subscriber runs in the process
that published.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from django.db import transaction

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Event:
    """An event of the product; the subclasses below are all there are."""


@dataclass(frozen=True)
class PoolChanged(Event):
    pool: str  # the canonical name of the pool or subpool that changed


@dataclass(frozen=True)
class PoolArchived(Event):
    pool: str  # the canonical name of the archived pool or subpool


@dataclass(frozen=True)
class WorkflowAdmitted(Event):
    workflow: str
    pool: str


@dataclass(frozen=True)
class WorkflowsCanceled(Event):
    workflows: tuple[str, ...]


E = TypeVar("E", bound=Event)
_subscribers: dict[type[Event], list[Callable[[Event], None]]] = defaultdict(list)


def subscribe(event_type: type[E], handler: Callable[[E], None]) -> None:
    """Call ``handler`` with every ``event_type`` published from now on (once per handler)."""
    if handler not in _subscribers[event_type]:
        _subscribers[event_type].append(handler)


def subscribers(event_type: type[Event]) -> list[Callable[[Event], None]]:
    return list(_subscribers[event_type])


def publish(event: Event) -> None:
    """Deliver ``event`` once the current transaction commits."""
    transaction.on_commit(lambda: deliver(event))


def deliver(event: Event) -> None:
    for handler in subscribers(type(event)):
        try:
            handler(event)
        except Exception:  # noqa: BLE001 - committed work must not fail; see the docstring
            logger.exception("%s: subscriber %s failed", type(event).__name__,
                             getattr(handler, "__qualname__", handler))
