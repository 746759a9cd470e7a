"""Who may act as a backend's agent: a user in `osmo-backend-{name}` (that backend only) or
in `osmo-backend` (any). Nobody else, platform admins included: an agent's token is a
machine's, and an admin's token is not meant to be left in a cluster."""

from __future__ import annotations

from osmo.accounts.roles import BACKEND_GROUP, roles_for
from osmo.errors import Forbidden


def agent_group(name: str) -> str:
    return f"{BACKEND_GROUP}-{name}"


def require_agent_of(user, name: str) -> None:
    roles = roles_for(user)
    if roles.backend or agent_group(name) in roles.group_names:
        return
    raise Forbidden(f"Only an agent of backend '{name[:63]}' ({agent_group(name[:63])} or "
                    f"{BACKEND_GROUP}) may do this.")
