"""The one exception an invalid workflow spec raises."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence


class SpecError(ValueError):
    """An invalid OSMO workflow spec.

    ``errors`` maps field paths (``workflow.groups[1].tasks[0].resource``) to lists of
    messages; the Django layer returns it as HTTP 400 ``invalid_spec`` with ``errors``.
    ``warnings`` carries non-fatal findings collected before the failure (same shape).
    """

    def __init__(
        self,
        errors: dict[str, list[str]],
        warnings: dict[str, list[str]] | None = None,
    ):
        self.errors = errors
        self.warnings = warnings or {}
        super().__init__(self._summary())

    def _summary(self) -> str:
        parts = [f"{path}: {message}" for path, messages in self.errors.items()
                 for message in messages]
        head = "; ".join(parts[:3])
        more = f" (+{len(parts) - 3} more)" if len(parts) > 3 else ""
        return f"invalid workflow spec: {head}{more}"


class ErrorCollector:
    """Accumulates errors by path so a client sees every problem in one response."""

    def __init__(self) -> None:
        self.errors: dict[str, list[str]] = {}
        self.warnings: dict[str, list[str]] = {}

    def add(self, path: str, message: str) -> None:
        bucket = self.errors.setdefault(path, [])
        if message not in bucket:
            bucket.append(message)

    def warn(self, path: str, message: str) -> None:
        bucket = self.warnings.setdefault(path, [])
        if message not in bucket:
            bucket.append(message)

    def unknown_keys(self, keys: Iterable[object], known: Sequence[str], prefix: str,
                     what: str = "field") -> None:
        """Refuse every key outside ``known`` at ``prefix.key``, naming the nearest valid one:
        a misspelled field left alone would silently drop what it meant to say."""
        for key in keys:
            if key not in known:
                path = f"{prefix}.{key}" if prefix else str(key)
                self.add(path, unknown_key_message(str(key), known, what))

    def __bool__(self) -> bool:
        return bool(self.errors)

    def raise_if_any(self) -> None:
        if self.errors:
            raise SpecError(self.errors, self.warnings)


def unknown_key_message(key: str, known: Sequence[str], what: str = "field") -> str:
    """``unknown task field 'comand', did you mean 'command'? (known: ...)``."""
    near = difflib.get_close_matches(key, known, n=1)
    hint = f", did you mean '{near[0]}'?" if near else ""
    return f"unknown {what} '{key}'{hint} (known: {', '.join(known)})"
