"""The input limits in force: the defaults of osmo.bounded, raised by settings."""

from __future__ import annotations

from django.conf import settings

from osmo.bounded import InputLimits


def input_limits() -> InputLimits:
    return InputLimits(**settings.OSMO_INPUT_LIMITS)
