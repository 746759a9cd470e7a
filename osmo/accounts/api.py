"""Login-token exchange and profile settings, as the OSMO client calls them
(docs/API-OSMO-CLIENT.md)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo.serializers import (
    QueryBooleanField,
    RequestSerializer,
    StrictBooleanField,
    StrictCharField,
)
from pools import selectors as pool_selectors

from . import selectors, services
from .models import AccessToken, UserProfile
from .roles import roles_for


class AccessTokenExchangeSerializer(RequestSerializer):
    token = StrictCharField(help_text="A personal access token.")


class AccessTokenExchangeView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

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


class ProfileSettingsSerializer(RequestSerializer):
    pool = StrictCharField(required=False, allow_null=True, allow_blank=True,
                           help_text="Default pool (canonical name); empty or null clears it.")
    email_notification = StrictBooleanField(required=False)
    slack_notification = StrictBooleanField(required=False)

    def validate(self, attrs):
        if attrs.get("email_notification") or attrs.get("slack_notification"):
            raise serializers.ValidationError(
                {"notifications": ["Notifications are not offered by this service."]})
        return attrs


def _settings_body(request) -> dict:
    roles = roles_for(request.user)
    profile = (UserProfile.objects.select_related("default_pool")
               .filter(user=request.user).first())
    default_pool = profile.default_pool if profile else None
    pools = pool_selectors.submittable_pool_names(roles=roles)
    role_names = list(roles.group_names)
    if request.user.is_superuser:
        role_names.insert(0, "superuser")
    return {
        "profile": {
            "username": request.user.get_username(),
            "email_notification": False,
            "slack_notification": False,
            # A default pool that was archived or is no longer visible is not offered.
            "pool": default_pool.name if default_pool and default_pool.name in pools else None,
        },
        "pools": pools,
        "roles": role_names,
    }


_SETTINGS = inline_serializer("ProfileSettings", {
    "profile": inline_serializer("Profile", {
        "username": serializers.CharField(),
        "email_notification": serializers.BooleanField(),
        "slack_notification": serializers.BooleanField(),
        "pool": serializers.CharField(allow_null=True)}),
    "pools": serializers.ListField(child=serializers.CharField()),
    "roles": serializers.ListField(child=serializers.CharField())})


class ProfileSettingsView(APIView):
    @extend_schema(responses=_SETTINGS,
                   summary="The caller's profile: default pool, pools it may submit to, roles")
    def get(self, request):
        return Response(_settings_body(request))

    @extend_schema(request=ProfileSettingsSerializer, responses=_SETTINGS,
                   summary="Set the caller's default pool")
    def post(self, request):
        body = ProfileSettingsSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        if "pool" in body.validated_data:
            name = body.validated_data["pool"]
            pool = None
            if name:
                pool = pool_selectors.pool_get(name=name, roles=roles_for(request.user))
            services.profile_set_default_pool(user=request.user, pool=pool)
        return Response(_settings_body(request))


# --- personal access tokens --------------------------------------------------------------------

def token_object(token: AccessToken) -> dict:
    return {"id": token.pk, "name": token.name, "prefix": token.prefix,
            "user": token.user.get_username(),
            "created_at": token.created_at.isoformat().replace("+00:00", "Z"),
            "revoked_at": token.revoked_at.isoformat().replace("+00:00", "Z")
            if token.revoked_at else None}


class AccessTokenSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    prefix = serializers.CharField(help_text="Its first characters, to tell tokens apart.")
    user = serializers.CharField()
    created_at = serializers.DateTimeField()
    revoked_at = serializers.DateTimeField(allow_null=True)


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
    @extend_schema(request=None, responses=AccessTokenSerializer,
                   summary="Revoke a personal access token (its owner or a platform admin)")
    def delete(self, request, token_id: int):
        token = selectors.token_get(actor=request.user, token_id=token_id)
        return Response(token_object(services.token_revoke(actor=request.user, token=token)))
