"""Token and user writes."""

from __future__ import annotations

import hashlib
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from .models import AccessToken

TOKEN_PREFIX = "osmo_"


def token_digest(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


@transaction.atomic
def user_ensure(*, username: str, superuser: bool = False, groups: list[str] = ()):
    """Create the user if missing and add it to the groups (created if missing)."""
    user_model = get_user_model()
    user, _ = user_model.objects.get_or_create(username=username)
    if superuser and not (user.is_superuser and user.is_staff):
        user.is_superuser = user.is_staff = True
        user.save(update_fields=["is_superuser", "is_staff"])
    for name in groups:
        group, _ = Group.objects.get_or_create(name=name)
        user.groups.add(group)
    return user


@transaction.atomic
def token_issue(*, user) -> str:
    """Create a token for `user` and return the raw value; it is never stored or shown again."""
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    AccessToken.objects.create(user=user, digest=token_digest(raw), prefix=raw[:12])
    return raw


@transaction.atomic
def tokens_revoke_all(*, user) -> int:
    return AccessToken.objects.filter(user=user, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
