"""Where a user's notification webhook may post: only to the hosts an admin allows
(``OSMO_NOTIFY_WEBHOOK_HOSTS``), so a user-given URL cannot make the worker reach the
service's own network (SSRF). Pure: no Django."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


def refusal(url: str, allowed: Iterable[str]) -> str | None:
    """Why ``url`` may not be posted to (None: it may). An allowed entry is a host, which
    takes its scheme's default port, or ``host:port``; the match is exact (no subdomains)."""
    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORTS.get(parts.scheme)
    except ValueError:
        return "is not a valid URL"
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return "must be an http or https URL"
    if parts.username is not None or parts.password is not None:
        return "must not carry a user name or password"
    host = parts.hostname.lower()
    for entry in allowed:
        name, _, entry_port = entry.strip().lower().rpartition(":") \
            if entry.strip().count(":") == 1 else (entry.strip().lower(), "", "")
        wanted = int(entry_port) if entry_port.isdigit() else DEFAULT_PORTS[parts.scheme]
        if name == host and wanted == port:
            return None
    shown = f"{host}:{port}" if port != DEFAULT_PORTS[parts.scheme] else host
    return f"posts to {shown}, which is not an allowed webhook host"
