"""Login-token exchange and personal access tokens, as the OSMO client calls them
(docs/API-OSMO-CLIENT.md); the profile settings, which list pools, are `pools.api.profile_views`."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo.serializers import (
    QueryBooleanField,
    RequestSerializer,
    StrictCharField,
)

from . import selectors, services
from .models import AccessToken
from .roles import roles_for


class AccessTokenExchangeSerializer(RequestSerializer):
    token = StrictCharField(help_text="A personal access token.")


class AccessTokenExchangeView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]
    error_statuses = (401,)  # the token in the body is not (or no longer) valid

    @extend_schema(
        request=AccessTokenExchangeSerializer,
        responses=inline_serializer("LoginToken", {
            "token": serializers.CharField(help_text="A signed JWT with claims exp and name."),
            "expires_at": serializers.IntegerField(help_text="Expiry, epoch seconds.")}),
        summary="Exchange an access token for a short-lived login token (JWT)")
    def post(self, request):
        body = AccessTokenExchangeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        token, expires_at = services.login_token_issue(raw_token=body.validated_data["token"])
        return Response({"token": token, "expires_at": expires_at})


# --- personal access tokens --------------------------------------------------------------------

# OSMO's client reads a day from `expires_at`; a token that never expires shows this one.
NEVER = "9999-12-31T00:00:00"


def token_object(token: AccessToken) -> dict:
    return {"id": token.pk, "name": token.name, "prefix": token.prefix,
            "user": token.user.get_username(),
            "created_at": token.created_at.isoformat().replace("+00:00", "Z"),
            "revoked_at": token.revoked_at.isoformat().replace("+00:00", "Z")
            if token.revoked_at else None,
            # OSMO's shape beside ours (`osmo token list`)
            "token_name": token.name, "description": token.description,
            "expires_at": token.expires_at.replace(tzinfo=None).isoformat()
            if token.expires_at else NEVER,
            "roles": list(roles_for(token.user).group_names)}


class AccessTokenSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="Its first characters, to tell tokens apart.")
    user = serializers.CharField()
    created_at = serializers.DateTimeField()
    revoked_at = serializers.DateTimeField(allow_null=True)
    token_name = serializers.CharField(help_text="Same as `name` (the OSMO client's key).")
    description = serializers.CharField()
    expires_at = serializers.CharField(help_text=f"Naive UTC; `{NEVER}`: never.")
    roles = serializers.ListField(child=serializers.CharField(),
                                  help_text="Its user's roles (groups).")


class AccessTokenCreateSerializer(RequestSerializer):
    name = StrictCharField(required=False, default="", allow_blank=True, max_length=100)
    user = StrictCharField(required=False, max_length=150,
                           help_text="Platform admins: another user's (created if missing).")


class AccessTokenListQuerySerializer(RequestSerializer):
    user = serializers.CharField(required=False, max_length=150,
                                 help_text="Platform admins: this user's tokens.")
    include_revoked = QueryBooleanField(required=False, default=False)


class AccessTokenListView(APIView):
    @extend_schema(parameters=[AccessTokenListQuerySerializer],
                   responses=AccessTokenSerializer(many=True),
                   summary="Your personal access tokens (platform admins: anyone's)")
    def get(self, request):
        query = AccessTokenListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        tokens = selectors.tokens_visible(actor=request.user,
                                          username=query.validated_data.get("user"),
                                          include_revoked=query.validated_data[
                                              "include_revoked"])
        return Response([token_object(token) for token in tokens])

    @extend_schema(request=AccessTokenCreateSerializer,
                   responses={201: inline_serializer("AccessTokenCreated", {
                       **AccessTokenSerializer().fields,
                       "token": serializers.CharField(help_text="Shown this once.")})},
                   summary="Create a personal access token")
    def post(self, request):
        body = AccessTokenCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        token, raw = services.token_create(actor=request.user,
                                           username=body.validated_data.get("user"),
                                           name=body.validated_data["name"])
        return Response({**token_object(token), "token": raw}, status=201)


class AccessTokenDetailView(APIView):
    @extend_schema(request=None, responses={200: AccessTokenSerializer},
                   summary="Revoke a personal access token (its owner or a platform admin)")
    def delete(self, request, token_id: int):
        token = selectors.token_get(actor=request.user, token_id=token_id)
        return Response(token_object(services.token_revoke(actor=request.user, token=token)))
