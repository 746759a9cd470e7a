from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from rest_framework import authentication, exceptions

from . import login_tokens
from .services import token_lookup, token_with_roles


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <token>`: an access token (against the stored SHA-256 digests) or
    a login token exchanged for one (osmo.accounts.login_tokens), valid while it has not
    expired and its access token is unrevoked."""

    keyword = "bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).split()
        if not header or header[0].lower() != self.keyword.encode():
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Malformed Authorization header.")
        try:
            raw = header[1].decode()
        except UnicodeDecodeError as exc:
            raise exceptions.AuthenticationFailed("Malformed token.") from exc
        if login_tokens.looks_like_jwt(raw):
            return self._login_token(raw)
        token = token_lookup(raw)
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
        return token.user, token

    @staticmethod
    def _login_token(raw: str):
        try:
            claims = login_tokens.decode(raw)
        except login_tokens.InvalidLoginToken as exc:
            raise exceptions.AuthenticationFailed("Expired or invalid login token.") from exc
        token = token_with_roles(pk=claims.token_id, user_id=claims.user_id)
        if token is None:
            raise exceptions.AuthenticationFailed(
                "The access token behind this login token was revoked.")
        return token.user, token

    def authenticate_header(self, request):
        return "Bearer"


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """Describes the bearer tokens in the OpenAPI document."""

    target_class = BearerTokenAuthentication
    name = "bearerToken"

    def get_security_definition(self, auto_schema):
        return build_bearer_security_scheme_object(header_name="Authorization",
                                                   token_prefix="Bearer")
