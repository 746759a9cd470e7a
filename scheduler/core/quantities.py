"""Kubernetes quantities (``4Gi``, ``500m``, ``2``) as integers, and back. Pure, so that every
reading of a pod's requests or a Node's allocatable — the scheduler's, admission's, the Node
table's — parses them alike (``scheduler/core/decode.py``)."""

from __future__ import annotations

import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

# Only ASCII digits are numbers: Python's `\d`, int() and Decimal() also read '８' as 8.
_QUANTITY = re.compile(r"^([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)([a-zA-Z]*)$",
                       re.ASCII)
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_INTEGER = re.compile(r"[0-9]+")


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
