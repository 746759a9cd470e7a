"""Plain-text tables and JSON for machine output."""

from __future__ import annotations

import json
from collections.abc import Sequence


def table(headers: Sequence[str], rows: Sequence[Sequence[object]],
          min_widths: Sequence[int] = ()) -> str:
    """Columns two spaces apart, each as wide as its widest cell (or its minimum), a dash rule
    under the header, no trailing spaces."""
    cells = [[str(value) for value in row] for row in rows]
    widths = []
    for index, header in enumerate(headers):
        minimum = min_widths[index] if index < len(min_widths) else 0
        widths.append(max(len(header), minimum, *(len(row[index]) for row in cells)))

    def line(values: Sequence[str]) -> str:
        return "  ".join(value.ljust(width) for value, width in zip(values, widths,
                                                                    strict=True)).rstrip()

    return "\n".join([line(headers), line(["-" * width for width in widths]),
                      *(line(row) for row in cells)]) + "\n"


def to_json(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"


def dash(value: object) -> str:
    return "-" if value is None or value == "" else str(value)
