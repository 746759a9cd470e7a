from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from rest_framework import authentication, exceptions

from .models import AccessToken
from .services import token_digest


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """`Authorization: Bearer <token>` against the stored SHA-256 digests."""

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
        token = (
            AccessToken.objects.select_related("user")
            .filter(digest=token_digest(raw), revoked_at__isnull=True)
            .first()
        )
        if token is None or not token.user.is_active:
            raise exceptions.AuthenticationFailed("Invalid or revoked token.")
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
