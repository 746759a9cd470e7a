"""OSMO durations, normalized to integers; Kubernetes quantities are read by the scheduler's
pure core (``scheduler/core/quantities.py``), named here too for the spec's modules."""

from __future__ import annotations

import math
import re

from scheduler.core.quantities import (
    ascii_digits,
    format_bytes,
    format_cpu,
    parse_bytes,
    parse_millicores,
)

__all__ = ["MAX_DURATION_SECONDS", "ascii_digits", "format_bytes", "format_cpu", "parse_bytes",
           "parse_duration_seconds", "parse_millicores"]

_DURATION_PART = re.compile(r"(\d+)(ms|us|[dhms])", re.ASCII)
_DURATION_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001, "us": 0.000001}
_ISO_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$",
                           re.ASCII)
MAX_DURATION_SECONDS = 2**31 - 1


def parse_duration_seconds(value: object) -> int:
    """A duration in OSMO's forms -> whole seconds (a fraction rounds up): a number of seconds,
    ``<integer><unit>`` with unit d, h, m, s, ms or us (``10m``, ``8h``, ``2d``), or ISO 8601
    (``PT10S``, ``P1DT2H``); combinations such as ``1h30m`` are accepted too. At most
    `MAX_DURATION_SECONDS` (about 68 years: it is stored as a 32-bit number)."""
    seconds = _duration_seconds(value)
    if seconds > MAX_DURATION_SECONDS:
        raise ValueError(f"'{value}' is longer than {MAX_DURATION_SECONDS} s")
    return seconds


def _duration_seconds(value: object) -> int:
    if isinstance(value, bool):
        raise ValueError(f"expected a duration, got {value!r}")
    if isinstance(value, int | float):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"must be a finite number of seconds, not negative, got {value}")
        return math.ceil(value)
    if isinstance(value, str):
        text = value.strip()
        if (seconds := ascii_digits(text)) is not None:
            return seconds
        iso = _ISO_DURATION.match(text)
        if iso and text != "P" and any(iso.groups()):
            days, hours, minutes, seconds = (float(part or 0) for part in iso.groups())
            return math.ceil(days * 86400 + hours * 3600 + minutes * 60 + seconds)
        parts = _DURATION_PART.findall(text)
        if parts and "".join(f"{n}{u}" for n, u in parts) == text:
            return math.ceil(sum(int(n) * _DURATION_SECONDS[u] for n, u in parts))
    raise ValueError(f"'{value}' is not a duration (e.g. 10m, 8h, 2d, 45s, PT10S)")


