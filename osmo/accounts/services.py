"""Token and user writes."""

from __future__ import annotations

import hashlib
import secrets
from functools import cache

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection, transaction
from django.utils import timezone

from osmo import webhook_hosts
from osmo.errors import Conflict, Forbidden, OsmoError

from . import login_tokens
from .models import AccessToken, UserProfile
from .roles import roles_attach, roles_for

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
def token_issue(*, user, name: str = "", description: str = "", expires_at=None) -> str:
    """Create a token for `user` and return the raw value; it is never stored or shown again."""
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    AccessToken.objects.create(user=user, digest=token_digest(raw), prefix=raw[:12], name=name,
                               description=description, expires_at=expires_at)
    return raw


@transaction.atomic
def token_keep_one(*, user, name: str, raw: str | None, description: str = "") -> str:
    """The one live token called `name` of `user`: `raw` again while it is that token and
    live, else a new one; every other live token of that name is revoked."""
    live = AccessToken.objects.live().filter(user=user, name=name)
    if raw and live.filter(digest=token_digest(raw)).exists():
        keep = raw
    else:
        keep = token_issue(user=user, name=name, description=description)
    live.exclude(digest=token_digest(keep)).update(revoked_at=timezone.now())
    return keep


@transaction.atomic
def tokens_revoke_all(*, user) -> int:
    return AccessToken.objects.filter(user=user, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )


@cache
def _token_statement() -> tuple[str, list[str], list[str]]:
    """The live token with a given digest (or id and user), its user if active, and the
    user's group names: one statement, built once from the models' columns."""
    user_model = get_user_model()
    memberships = user_model.groups.through._meta.db_table
    columns = [f't."{f.column}"' for f in AccessToken._meta.concrete_fields] + [
        f'u."{f.column}"' for f in user_model._meta.concrete_fields]
    sql = (f"SELECT {', '.join(columns)}, ARRAY(SELECT g.name FROM {Group._meta.db_table} g "
           f"JOIN {memberships} m ON m.group_id = g.id WHERE m.user_id = u.id) "
           f"FROM {AccessToken._meta.db_table} t JOIN {user_model._meta.db_table} u "
           f"ON u.id = t.user_id WHERE u.is_active AND t.revoked_at IS NULL "
           f"AND (t.expires_at IS NULL OR t.expires_at > %s) AND ")
    return (sql, [f.attname for f in AccessToken._meta.concrete_fields],
            [f.attname for f in user_model._meta.concrete_fields])


def token_with_roles(*, digest: str | None = None, pk: int | None = None,
                     user_id: int | None = None) -> AccessToken | None:
    """The live access token with this digest (or this id and user), its active user, and the
    user's roles: every request's authentication, so one hand-written statement rather than
    the ORM's three (building them cost a third of a small request's CPU); None when there
    is none."""
    sql, token_fields, user_fields = _token_statement()
    if digest is not None:
        sql, params = sql + "t.digest = %s", [timezone.now(), digest]
    else:
        sql, params = sql + "t.id = %s AND t.user_id = %s", [timezone.now(), pk, user_id]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return None
    split = len(token_fields)
    token = AccessToken.from_db(connection.alias, token_fields, row[:split])
    token.user = get_user_model().from_db(connection.alias, user_fields,
                                          row[split:split + len(user_fields)])
    roles_attach(token.user, row[-1])
    return token


def token_lookup(raw: str) -> AccessToken | None:
    """The unrevoked access token of an active user with this raw value, else None."""
    return token_with_roles(digest=token_digest(raw))


def login_token_issue(*, raw_token: str) -> tuple[str, int]:
    """Exchange an access token for a short-lived login token: (JWT, expiry epoch seconds).
    An unknown or revoked access token is 401 `not_authenticated`."""
    token = token_lookup(raw_token) if not login_tokens.looks_like_jwt(raw_token) else None
    if token is None:
        raise OsmoError("not_authenticated", "Invalid or revoked access token.", status_code=401)
    return login_tokens.encode(user_id=token.user_id, token_id=token.pk,
                               username=token.user.get_username())


@transaction.atomic
def profile_set_default_pool(*, user, pool) -> UserProfile:
    """Set (or, with None, clear) the user's default pool; the caller checked visibility."""
    profile, _ = UserProfile.objects.select_for_update().get_or_create(user=user)
    profile.default_pool = pool
    profile.full_clean()
    profile.save()
    return profile


@transaction.atomic
def token_create(*, actor, username: str | None = None, name: str = "",
                 description: str = "", expires_at=None, unique_name: bool = False
                 ) -> tuple[AccessToken, str]:
    """A new token for the actor, or for ``username`` (created if missing, as `issue_token`
    does) when a platform admin asks; returns the row and the raw value, shown once.
    ``unique_name``: refuse (409) a name the user's live tokens already have (OSMO's tokens
    are known by name)."""
    user = actor
    if username and username != actor.get_username():
        if not roles_for(actor).platform_admin:
            raise Forbidden("Only platform admins manage other users' tokens.")
        user = user_ensure(username=username)
    if unique_name:
        # one writer per user at a time: two requests cannot both take the name
        type(user).objects.select_for_update().filter(pk=user.pk).exists()
        if AccessToken.objects.live().filter(user=user, name=name).exists():
            raise Conflict("token_exists", f"An access token named '{name}' exists.")
    raw = token_issue(user=user, name=name, description=description, expires_at=expires_at)
    return AccessToken.objects.get(digest=token_digest(raw)), raw


@transaction.atomic
def token_revoke(*, actor, token: AccessToken) -> AccessToken:
    """Revoke one token (idempotent): its owner or a platform admin. Its login tokens and
    dashboard sessions end with it."""
    if token.user_id != actor.pk and not roles_for(actor).platform_admin:
        raise Forbidden("Only platform admins manage other users' tokens.")
    AccessToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now())
    token.refresh_from_db()
    return token


@transaction.atomic
def profile_set_notifications(*, user, **changes) -> UserProfile:
    """Set the user's notification settings (email_notification, email_address,
    slack_notification, slack_webhook_url; absent ones keep their value). A channel turned
    on needs where to send: an email address (the profile's, else the user's) or a webhook."""
    profile, _ = UserProfile.objects.select_for_update().get_or_create(user=user)
    for field, value in changes.items():
        setattr(profile, field, value)
    problems = {}
    if profile.email_notification and not (profile.email_address or user.email):
        problems["email"] = ["Email notifications need an address: set `email`."]
    if profile.slack_notification and not profile.slack_webhook_url:
        problems["slack_webhook"] = ["Slack notifications need a webhook: set `slack_webhook`."]
    elif "slack_webhook_url" in changes and profile.slack_webhook_url:
        why = webhook_hosts.refusal(profile.slack_webhook_url,
                                    settings.OSMO_NOTIFY_WEBHOOK_HOSTS)
        if why is not None:  # the message names the host, never the URL (its path is secret)
            problems["slack_webhook"] = [f"The webhook {why}."]
    if problems:
        raise OsmoError("invalid_request", " ".join(m for ms in problems.values() for m in ms),
                        errors=problems, status_code=400)
    profile.full_clean()
    profile.save()
    return profile
