"""OSMO's exit actions: what a task's exit code makes of it (COMPLETE, FAIL or RESCHEDULE).

A spec's `exitActions` (per task) and a pool's `default_exit_actions` map an action to exit
codes written as OSMO writes them, ``"0,1-10,16"``. Pure: the spec parser, the pool services
and the state machine share it. Without a matching range, exit code 0 completes and any other
fails (OSMO's default).
"""

from __future__ import annotations

from collections.abc import Mapping

ACTIONS = ("COMPLETE", "FAIL", "RESCHEDULE")
MAX_CODE = 4095  # OSMO's codes go to the 3000s (its service's own); a bound for the ranges
MAX_TEXT = 200  # characters of one action's ranges
MAX_PARTS = 32  # ranges or codes of one action


class ExitActionsError(ValueError):
    """A mapping that does not parse; ``path`` is where, below the mapping."""

    def __init__(self, path: str, message: str):
        super().__init__(message)
        self.path = path


def parse_ranges(text: object) -> tuple[tuple[int, int], ...]:
    """``"0,1-10,16"`` → ((0, 0), (1, 10), (16, 16)); a bare integer is one code."""
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise ExitActionsError("", f"must be exit codes like \"1-5,10\", got {text!r}")
    text = str(text)
    if len(text) > MAX_TEXT:
        raise ExitActionsError("", f"at most {MAX_TEXT} characters")
    parts = [p.strip() for p in text.split(",")]
    if len(parts) > MAX_PARTS:
        raise ExitActionsError("", f"at most {MAX_PARTS} codes or ranges")
    ranges = []
    for part in parts:
        low, sep, high = part.partition("-")
        if not low.strip().isdigit() or (sep and not high.strip().isdigit()):
            raise ExitActionsError("", f"'{part}' is not an exit code or a range "
                                       "like 1-5 (format: start1-end1,code2,...)")
        first, last = int(low), int(high) if sep else int(low)
        if first > last or last > MAX_CODE:
            raise ExitActionsError("", f"'{part}': a range goes up, from 0 to {MAX_CODE}")
        ranges.append((first, last))
    return tuple(ranges)


def parse_exit_actions(raw: object) -> dict[str, str]:
    """Validate an action → ranges mapping; returns it normalised (action → its text, no
    spaces). Overlapping codes of two actions are refused, as OSMO asks them not to be."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ExitActionsError("", "must be a mapping of COMPLETE, FAIL or RESCHEDULE to "
                                   "exit codes")
    out: dict[str, str] = {}
    seen: list[tuple[str, int, int]] = []
    for action, text in raw.items():
        if action not in ACTIONS:
            raise ExitActionsError(f".{action}" if isinstance(action, str) else "",
                                   f"unknown exit action {action!r} (one of "
                                   f"{', '.join(ACTIONS)})")
        try:
            ranges = parse_ranges(text)
        except ExitActionsError as exc:
            raise ExitActionsError(f".{action}", str(exc)) from None
        for first, last in ranges:
            for other, low, high in seen:
                if other != action and first <= high and low <= last:
                    raise ExitActionsError(f".{action}", f"codes {first}-{last} are also "
                                                         f"{other}'s")
            seen.append((action, first, last))
        out[action] = ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ranges)
    return out


def matching_action(exit_code: int, *mappings: Mapping[str, str] | None) -> str | None:
    """The action of the first mapping (the task's, then the pool's) with a range holding
    ``exit_code``; None when none holds it."""
    for mapping in mappings:
        for action, text in (mapping or {}).items():
            if any(low <= exit_code <= high for low, high in parse_ranges(text)):
                return action
    return None


def action_for(exit_code: int, *mappings: Mapping[str, str] | None) -> str:
    """:func:`matching_action`, else OSMO's default: COMPLETE for 0, FAIL for any other."""
    return matching_action(exit_code, *mappings) or ("COMPLETE" if exit_code == 0 else "FAIL")
