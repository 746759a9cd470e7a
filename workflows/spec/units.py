"""Kubernetes-style quantities and OSMO durations, normalized to integers."""

from __future__ import annotations

import math
import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

# Only ASCII digits are numbers: Python's `\d`, int() and Decimal() also read '８' as 8.
_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)([a-zA-Z]*)$",
                       re.ASCII)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_DURATION_PART = re.compile(r"(\d+)(ms|us|[dhms])", re.ASCII)
_DURATION_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001, "us": 0.000001}
_ISO_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$",
                           re.ASCII)
_INTEGER = re.compile(r"[0-9]+")
MAX_DURATION_SECONDS = 2**31 - 1


def ascii_digits(text: str) -> int | None:
    """`text` (spaces around it aside) as a whole number when it is ASCII digits, else None
    (int() also reads '８', '1_000' and '+1')."""
    text = text.strip()
    return int(text) if _INTEGER.fullmatch(text) else None


def _decimal_quantity(value: object) -> Decimal:
    """Parse a quantity (int, float or string like ``4Gi``, ``500m``, ``1e3``) to a Decimal."""
    if isinstance(value, bool):
        raise ValueError(f"expected a quantity, got {value!r}")
    if isinstance(value, int | float):
        return Decimal(str(value))
    if not isinstance(value, str):
        raise ValueError(f"expected a quantity, got {value!r}")
    match = _QUANTITY.match(value.strip())
    if not match:
        raise ValueError(f"'{value}' is not a quantity (e.g. 4Gi, 512Mi, 500m, 2)")
    number, suffix = match.groups()
    try:
        amount = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
        raise ValueError(f"'{value}' is not a quantity") from exc
    if suffix in _BINARY:
        return amount * _BINARY[suffix]
    if suffix in _DECIMAL:
        return amount * _DECIMAL[suffix]
    if suffix == "m":
        return amount / 1000
    raise ValueError(f"'{value}' has an unknown unit '{suffix}'")


def parse_bytes(value: object) -> int:
    """Memory/storage → bytes (fractions of a byte round up, as Kubernetes does)."""
    amount = _decimal_quantity(value)
    if amount < 0:
        raise ValueError(f"must not be negative, got {value!r}")
    return int(amount.to_integral_value(rounding=ROUND_CEILING))


def parse_millicores(value: object) -> int:
    """CPU (cores as a number, or ``500m``) → millicores; below 1m rounds up to 1m."""
    amount = _decimal_quantity(value) * 1000
    if amount < 0:
        raise ValueError(f"must not be negative, got {value!r}")
    return int(amount.to_integral_value(rounding=ROUND_CEILING))


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


def format_cpu(millicores: int) -> str:
    """Millicores → the shortest exact Kubernetes quantity."""
    return str(millicores // 1000) if millicores % 1000 == 0 else f"{millicores}m"


def format_bytes(count: int) -> str:
    """Bytes → the largest exact binary-suffixed Kubernetes quantity."""
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = _BINARY[suffix]
        if count and count % unit == 0:
            return f"{count // unit}{suffix}"
    return str(count)
