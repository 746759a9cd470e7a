"""Who may read ``/metrics``: a token whose user is in the group ``osmo-metrics`` (platform
admins too), or any caller from an address an admin allows (``OSMO_METRICS_ALLOWED_ADDRESSES``,
addresses or networks, e.g. the Prometheus pods' range). The address is the connection's peer
(``REMOTE_ADDR``); a forwarded header is never trusted."""

from __future__ import annotations

import ipaddress
from types import SimpleNamespace

from django.conf import settings
from rest_framework import exceptions

from osmo.accounts.authentication import BearerTokenAuthentication
from osmo.accounts.roles import roles_for

METRICS_GROUP = "osmo-metrics"


def address_allowed(remote_addr: str) -> bool:
    try:
        address = ipaddress.ip_address(remote_addr)
    except ValueError:
        return False
    if address.version == 6 and address.ipv4_mapped:
        address = address.ipv4_mapped
    return any(address in network for network in settings.OSMO_METRICS_ALLOWED_NETWORKS)


def denial(remote_addr: str, authorization: str | None) -> tuple[int, str, str] | None:
    """None when the caller may read the metrics, else (status, code, detail)."""
    if address_allowed(remote_addr):
        return None
    if not authorization:
        return 401, "not_authenticated", (
            f"A token of a user in '{METRICS_GROUP}' (or a platform admin), or a scrape from "
            "an address in OSMO_METRICS_ALLOWED_ADDRESSES.")
    shim = SimpleNamespace(headers={"authorization": authorization},
                           META={"HTTP_AUTHORIZATION": authorization})
    try:
        found = BearerTokenAuthentication().authenticate(shim)
    except exceptions.AuthenticationFailed as failed:
        return 401, "not_authenticated", str(failed.detail)
    if found is None:
        return 401, "not_authenticated", "Use `Authorization: Bearer <token>`."
    roles = roles_for(found[0])
    if roles.platform_admin or METRICS_GROUP in roles.group_names:
        return None
    return 403, "forbidden", f"Reading metrics needs the role '{METRICS_GROUP}'."
