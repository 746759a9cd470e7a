"""The scheduling cycle's knobs, the same for every backend our scheduler places pods on (the
embedded cycle and `placement: osmo` on Kubernetes)."""

from __future__ import annotations

from django.conf import settings

from scheduler.core import SchedulerConfig


def scheduler_config() -> SchedulerConfig:
    """The cycle's knobs from settings."""
    return SchedulerConfig(reserve_after_seconds=settings.OSMO_RESERVE_AFTER,
                           max_reservations=settings.OSMO_MAX_RESERVATIONS,
                           usage_k_value=settings.OSMO_USAGE_K_VALUE)
