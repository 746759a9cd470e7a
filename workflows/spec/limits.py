"""The spec's input limits: `osmo.bounded` measures the text (depth, size with aliases
expanded, the groups and tasks it holds), the parser counts replicas and the template sandbox
its work; every refusal is a `SpecError` with its own contract code."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from osmo import bounded
from osmo.bounded import DEFAULT_LIMITS, InputLimits, ItemLimit  # noqa: F401 - the spec's

from .errors import SpecError


class LimitExceeded(SpecError):
    """Input over one of the limits: its own contract code, the field path and the limit."""

    def __init__(self, code: str, path: str, message: str):
        self.code = code
        super().__init__({path: [message]})


@contextmanager
def _as_spec_error() -> Iterator[None]:
    try:
        yield
    except bounded.LimitExceeded as error:
        raise LimitExceeded(error.code, error.path, error.message) from error


def load_yaml(text: str, limits: InputLimits = DEFAULT_LIMITS, *, path: str = "file",
              items: Sequence[ItemLimit] = ()) -> Any:
    with _as_spec_error():
        return bounded.load_yaml(text, limits, path=path, items=items)


def load_yaml_all(text: str, limits: InputLimits = DEFAULT_LIMITS, *,
                  path: str = "file") -> list[Any]:
    with _as_spec_error():
        return bounded.load_yaml_all(text, limits, path=path)
