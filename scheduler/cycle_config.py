"""The scheduling cycle's knobs, the same for every backend our scheduler places pods on (the
embedded cycle and `placement: osmo` on Kubernetes)."""

from __future__ import annotations

from django.conf import settings

from scheduler.backends.spec import BackendSpec
from scheduler.core import SchedulerConfig


def scheduler_config() -> SchedulerConfig:
    """The cycle's knobs from settings."""
    return SchedulerConfig(reserve_after_seconds=settings.OSMO_RESERVE_AFTER,
                           max_reservations=settings.OSMO_MAX_RESERVATIONS,
                           usage_k_value=settings.OSMO_USAGE_K_VALUE)


def remote_scheduler(spec: BackendSpec) -> dict:
    """What a scheduler outside this service (the backend agent's, ``placement: osmo``) needs
    to run its cycles as this service's own would on backend ``spec``."""
    config = scheduler_config()
    return {"scheduler_name": spec.scheduler_name, "interval": spec.interval,
            "reserve_after_seconds": config.reserve_after_seconds,
            "max_reservations": config.max_reservations, "usage_k_value": config.usage_k_value}
