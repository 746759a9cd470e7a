"""Reads of users and tokens, with who may see what: a user sees their own tokens, a
platform admin anyone's; another user's token is 404 (no existence leak)."""

from __future__ import annotations

from osmo.errors import Forbidden, NotFound

from .models import AccessToken
from .roles import roles_for


def tokens_visible(*, actor, username: str | None = None, include_revoked: bool = False):
    tokens = AccessToken.objects.select_related("user").order_by("-created_at")
    if not include_revoked:
        tokens = tokens.live()
    if username and username != actor.get_username():
        if not roles_for(actor).platform_admin:
            raise Forbidden("Only platform admins see other users' tokens.")
        return tokens.filter(user__username=username)
    return tokens.filter(user=actor)


def token_get(*, actor, token_id: int) -> AccessToken:
    token = AccessToken.objects.select_related("user").filter(pk=token_id).first()
    if token is None or (token.user_id != actor.pk and not roles_for(actor).platform_admin):
        raise NotFound("token_not_found", f"No access token {token_id}.")
    return token


def token_by_name(*, actor, name: str, username: str | None = None) -> AccessToken:
    """The newest live token of that name of the actor (or, for a platform admin, of
    ``username``); 404 ``token_not_found`` otherwise."""
    token = tokens_visible(actor=actor, username=username).filter(name=name).first()
    if token is None:
        raise NotFound("token_not_found", f"No access token named '{name}'.")
    return token
