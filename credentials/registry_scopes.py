"""Which REGISTRY credential an image pulls with. Pure: no Django.

A REGISTRY credential is scoped to a registry host and, optionally, a path prefix of the
repositories it serves (``nvcr.io/nvidia/team-a``). An image is read as the container runtime
reads it: its registry host (exactly, port included; Docker Hub when it names none) and its
repository path (Docker Hub's one-part names are ``library/NAME``). A scope covers an image
when the hosts are equal and the scope's path is the repository's path or a prefix of it that
ends at a ``/`` (``team-a`` covers ``team-a/x``, never ``team-ab/x``). An image pulls with the
credentials of the most specific scope that covers it (the longest path); several credentials
of that very scope all go, as kubelet tries each.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

DOCKER_HUB = "docker.io"
_DOCKER_HUB_ALIASES = {"index.docker.io": DOCKER_HUB, "registry-1.docker.io": DOCKER_HUB}
SCOPE_MAX_CHARS = 255  # a repository name's limit in the distribution spec
_LABEL = r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?"
_HOST = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*(?::(?P<port>[0-9]{{1,5}}))?$")
# A path component of a repository name (the distribution spec's grammar).
_COMPONENT = re.compile(r"^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$")
# A registry given as its API's URL (``https://index.docker.io/v1/``) names the whole host.
_API_PATHS = {"v1", "v2"}

Key = TypeVar("Key")


class ScopeError(ValueError):
    """A registry scope that cannot be matched to images; the message says why."""


@dataclass(frozen=True)
class RegistryScope:
    host: str
    path: str = ""  # '' : every repository of the host

    def __str__(self) -> str:
        return f"{self.host}/{self.path}" if self.path else self.host

    @property
    def depth(self) -> int:
        return len(self.path.split("/")) if self.path else 0

    def covers(self, repository: RegistryScope) -> bool:
        """Does this scope serve the repository (same host, path on a segment boundary)?"""
        if self.host != repository.host:
            return False
        return not self.path or repository.path == self.path or \
            repository.path.startswith(self.path + "/")


def _host(text: str) -> str:
    host = text.lower()
    return _DOCKER_HUB_ALIASES.get(host, host) if host else DOCKER_HUB


def parse_scope(registry: str) -> RegistryScope:
    """A credential's ``registry`` as a scope: ``host[:port][/path/prefix]``, optionally
    written as a URL (``https://``; a bare ``/v1/`` or ``/v2/`` path is the registry's API,
    not a repository path); '' is Docker Hub. Raises ScopeError."""
    text = registry.strip()
    scheme = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://", text)
    if scheme:
        if scheme.group(1).lower() not in ("http", "https"):
            raise ScopeError("a registry URL starts with https:// or http://")
        text = text[scheme.end():]
    if len(text) > SCOPE_MAX_CHARS:
        raise ScopeError(f"at most {SCOPE_MAX_CHARS} characters")
    if any(mark in text for mark in "?#@\\") or any(c.isspace() for c in text):
        raise ScopeError("a registry host and path only: no tag, digest, query or spaces")
    host_text, _, path = text.partition("/")
    if not host_text and not path:
        return RegistryScope(DOCKER_HUB)
    host = _host(host_text)
    match = _HOST.match(host)
    if not host_text or not match:
        raise ScopeError("the registry must start with a host name (a port may follow, "
                         "as registry.local:5000)")
    if match.group("port") is not None and not 0 < int(match.group("port")) < 65536:
        raise ScopeError("a registry's port is 1 to 65535")
    path = path[:-1] if path.endswith("/") else path  # one trailing slash is no part
    if path in _API_PATHS:
        path = ""
    if path:
        for component in path.split("/"):
            if not _COMPONENT.match(component):
                raise ScopeError(f"'{component[:64]}' is not a repository path component "
                                 "(lowercase letters and digits, joined by '.', '_', '__' "
                                 "or '-'; no empty part)")
    return RegistryScope(host, path)


def stored_scope(profile: str) -> RegistryScope:
    """A stored credential's scope (its profile); one kept before scopes were checked that
    does not parse is its host, matched exactly as it was then."""
    try:
        return parse_scope(profile)
    except ScopeError:
        return RegistryScope(profile.lower())


def image_repository(image: str) -> RegistryScope:
    """The registry host and repository path an image reference pulls from, as the container
    runtime reads it: its first component is a host when it has a dot or a port or is
    ``localhost``, else the image is Docker Hub's (a one-part name there is ``library/``'s)."""
    name = image.strip().split("@", 1)[0]  # a digest
    head, slash, last = name.rpartition("/")
    last = last.split(":", 1)[0]  # a tag (a port is only ever in the first component)
    name = f"{head}{slash}{last}"
    first, slash, rest = name.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost"):
        return RegistryScope(_host(first), rest)
    if not slash:
        return RegistryScope(DOCKER_HUB, f"library/{name}" if name else "")
    return RegistryScope(DOCKER_HUB, name)


def most_specific(scoped: Iterable[tuple[Key, RegistryScope]], image: str) -> list[Key]:
    """The keys, in the order given, of the most specific scopes that cover the image (none
    covers it: [])."""
    repository = image_repository(image)
    covering = [(key, scope) for key, scope in scoped if scope.covers(repository)]
    if not covering:
        return []
    deepest = max(scope.depth for _, scope in covering)
    return [key for key, scope in covering if scope.depth == deepest]
