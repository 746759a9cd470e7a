"""The input limits in force: workflows.spec.limits' defaults, raised by settings."""

from __future__ import annotations

from django.conf import settings

from workflows.spec.limits import InputLimits


def input_limits() -> InputLimits:
    return InputLimits(**settings.OSMO_INPUT_LIMITS)
