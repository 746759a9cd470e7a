"""What the OSMO CLI does before submitting: inline ``localpath:`` files as ``contents:``.

The server never reads a client's files (a ``localpath`` without ``contents`` is an
``invalid_spec``); this helper lets tools and tests submit a spec the way the CLI would. It
works on the raw text because a templated spec is not YAML until rendered server-side.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_LOCALPATH = re.compile(r"^(?P<indent>\s*)(?P<dash>-\s+)?localpath:\s*(?P<path>[^#\s]+)\s*(#.*)?$")


def inline_local_files(text: str, read_file: Callable[[str], str]) -> str:
    """Add a ``contents: |`` block after every ``localpath:`` line, read via ``read_file``."""
    out: list[str] = []
    for line in text.splitlines(keepends=True):
        out.append(line)
        match = _LOCALPATH.match(line.rstrip("\n"))
        if not match:
            continue
        key_indent = len(match["indent"]) + (len(match["dash"]) if match["dash"] else 0)
        pad = " " * key_indent
        if not line.endswith("\n"):
            out[-1] = line + "\n"
        out.append(f"{pad}contents: |\n")
        body = read_file(match["path"].strip("'\""))
        for content_line in body.splitlines() or [""]:
            out.append(f"{pad}  {content_line}\n" if content_line else "\n")
    return "".join(out)
