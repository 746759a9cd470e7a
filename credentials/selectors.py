"""Reads of credentials. Only `payloads_for_dispatch` and `registry_payloads_for_dispatch` open
a sealed payload: the Kubernetes backend's, to write the task's Secrets."""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Q

from . import crypto
from .models import Credential, CredentialType


def credentials_of(*, user):
    return Credential.objects.filter(user=user).order_by("-cred_type", "name")


def credentials_named(*, user_id: int, names: Iterable[str]) -> dict[str, Credential]:
    """The user's credentials among ``names``, by name (a missing name is absent)."""
    return {c.name: c for c in Credential.objects.filter(user_id=user_id, name__in=set(names))
            .only("name", "cred_type", "profile", "keys")}


def payloads_for_dispatch(*, user_id: int, names: Iterable[str]
                          ) -> dict[str, tuple[Credential, dict]]:
    """name → (credential, opened payload) of the user's credentials among ``names``."""
    return {c.name: (c, crypto.open_sealed(c.sealed))
            for c in Credential.objects.filter(user_id=user_id, name__in=set(names))}


def registry_payloads_for_dispatch(*, user_id: int, hosts: Iterable[str]
                                   ) -> list[tuple[Credential, dict]]:
    """(credential, opened payload) of the user's REGISTRY credentials scoped to these
    registry hosts (the whole host or a path of it), by name."""
    hosts = set(hosts)
    if not hosts:
        return []
    scoped = Q(profile__in=hosts)
    for host in hosts:
        scoped |= Q(profile__startswith=f"{host}/")
    return [(c, crypto.open_sealed(c.sealed)) for c in Credential.objects.filter(
        scoped, user_id=user_id, cred_type=CredentialType.REGISTRY).order_by("name")]
