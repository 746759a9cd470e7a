"""A session signed in with a personal access token lives only as long as that token: revoking
the token (`issue_token NAME --revoke-all`, or one token) ends the sessions made from it at
their next request. Sessions from the admin's password login are left to Django."""

from __future__ import annotations

from django.contrib.auth import logout

from .models import AccessToken

SESSION_TOKEN_KEY = "osmo_access_token_id"
# Why the last session ended, kept in the signed-out session until the sign-in page says it.
SESSION_ENDED_KEY = "osmo_session_ended"
TOKEN_REVOKED = "token_revoked"


def session_bind_token(request, token: AccessToken) -> None:
    """Call right after login: the session belongs to ``token`` from now on."""
    request.session[SESSION_TOKEN_KEY] = token.pk


class TokenSessionMiddleware:
    """After AuthenticationMiddleware: one indexed lookup per request of a token session."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        token_id = request.session.get(SESSION_TOKEN_KEY)
        if token_id is not None and not AccessToken.objects.live().filter(
                pk=token_id, user__is_active=True).exists():
            logout(request)  # flushes the session: the request goes on signed out
            request.session[SESSION_ENDED_KEY] = TOKEN_REVOKED
        return self.get_response(request)


def session_ended_reason(request) -> str | None:
    """Why the caller's last session ended (said once), or None."""
    return request.session.pop(SESSION_ENDED_KEY, None)
