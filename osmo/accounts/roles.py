"""Roles are Django groups (API.md "Authentication and roles").

- `osmo-admin` (or a superuser): platform admin.
- `osmo-{pool}-admin`: manages the subpools of `{pool}`; may submit to it.
- `osmo-{pool}-user`: may submit to and view `{pool}`.
- `{pool}` may end in `*` (prefix pattern). Roles are always judged on the top-level pool name,
  so access to a subpool is inherited from its parent and a subpool-specific group grants nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q

PLATFORM_ADMIN_GROUP = "osmo-admin"
BACKEND_GROUP = "osmo-backend"
ADMIN, USER = "admin", "user"


def _pattern_matches(pattern: str, name: str) -> bool:
    if pattern.endswith("*"):
        return name.startswith(pattern[:-1])
    return name == pattern


def parse_pool_group(group_name: str) -> tuple[str, str] | None:
    """`osmo-team*-user` → ("team*", "user"); None for other groups."""
    if not group_name.startswith("osmo-"):
        return None
    for role in (ADMIN, USER):
        suffix = f"-{role}"
        if group_name.endswith(suffix):
            pattern = group_name[len("osmo-"):-len(suffix)]
            if pattern and "--" not in pattern:
                return pattern, role
    return None


@dataclass(frozen=True)
class Roles:
    username: str | None
    platform_admin: bool
    backend: bool
    admin_patterns: tuple[str, ...]
    user_patterns: tuple[str, ...]
    group_names: tuple[str, ...] = ()

    def pool_role(self, top_level_name: str) -> str | None:
        """"admin", "user" or None for a top-level pool name."""
        if self.platform_admin or any(_pattern_matches(p, top_level_name)
                                      for p in self.admin_patterns):
            return ADMIN
        if any(_pattern_matches(p, top_level_name) for p in self.user_patterns):
            return USER
        return None

    def can_view(self, top_level_name: str) -> bool:
        return self.pool_role(top_level_name) is not None

    can_submit = can_view

    def can_admin(self, top_level_name: str) -> bool:
        return self.pool_role(top_level_name) == ADMIN

    def visible_q(self, name_field: str) -> Q | None:
        """A filter on a top-level pool name field; None means everything is visible."""
        if self.platform_admin:
            return None
        query = Q(pk__in=[])
        for pattern in self.admin_patterns + self.user_patterns:
            if pattern.endswith("*"):
                query |= Q(**{f"{name_field}__startswith": pattern[:-1]})
            else:
                query |= Q(**{name_field: pattern})
        return query


def roles_for(user) -> Roles:
    """The caller's roles, computed once per request object (one query for the groups)."""
    if user is None or not user.is_authenticated:
        return Roles(None, False, False, (), ())
    cached = getattr(user, "_osmo_roles", None)
    if cached is not None:
        return cached
    return roles_attach(user, user.groups.values_list("name", flat=True))


def roles_attach(user, group_names) -> Roles:
    """The roles of ``user`` from its group names, read with it (the token lookup reads them
    in the same query), kept on the user object for the rest of the request."""
    names = sorted(group_names)
    admin_patterns, user_patterns = [], []
    for name in names:
        parsed = parse_pool_group(name)
        if parsed:
            (admin_patterns if parsed[1] == ADMIN else user_patterns).append(parsed[0])
    roles = Roles(
        username=user.get_username(),
        platform_admin=user.is_superuser or PLATFORM_ADMIN_GROUP in names,
        backend=BACKEND_GROUP in names,
        admin_patterns=tuple(admin_patterns),
        user_patterns=tuple(user_patterns),
        group_names=tuple(names),
    )
    user._osmo_roles = roles
    return roles
