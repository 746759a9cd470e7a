"""The caller and its pools: `GET /api/whoami` and the profile settings (`GET|POST
/api/profile/settings`, the default pool, the notifications and the pools the caller may submit
to), as the OSMO client calls them (docs/API-OSMO-CLIENT.md)."""

from __future__ import annotations

from django.db import transaction
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo.accounts import services
from osmo.accounts.models import UserProfile
from osmo.accounts.roles import roles_for
from osmo.serializers import RequestSerializer, StrictBooleanField, StrictCharField

from .. import selectors as pool_selectors


def _role_names(request) -> list[str]:
    roles = roles_for(request.user)
    return (["superuser"] if request.user.is_superuser else []) + list(roles.group_names)


class WhoAmIView(APIView):
    @extend_schema(responses=inline_serializer("WhoAmI", {
        "user": serializers.CharField(), "roles": serializers.ListField(),
        "pools": serializers.DictField()}), summary="The caller, its roles and pool access")
    def get(self, request):
        roles = roles_for(request.user)
        visible = pool_selectors.visible_top_level_pools(roles=roles)
        pools = {name: roles.pool_role(name) for name in visible.values_list("name", flat=True)}
        return Response({"user": request.user.get_username(), "roles": _role_names(request),
                         "pools": pools})


class ProfileSettingsSerializer(RequestSerializer):
    pool = StrictCharField(required=False, allow_null=True, allow_blank=True,
                           help_text="Default pool (canonical name); empty or null clears it.")
    email_notification = StrictBooleanField(required=False,
                                            help_text="A message when a workflow ends.")
    slack_notification = StrictBooleanField(required=False)
    email = serializers.EmailField(required=False, allow_blank=True, max_length=254,
                                   help_text="Where emails go; empty: the account's email.")
    slack_webhook = serializers.URLField(required=False, allow_blank=True, max_length=500,
                                         help_text="A Slack incoming webhook URL; never shown "
                                                   "back (`slack_webhook_set` tells).")

    def validate_slack_webhook(self, url: str) -> str:
        if url and not url.startswith(("https://", "http://")):
            raise serializers.ValidationError("Must be an http(s) URL.")
        return url

    def validate(self, attrs):
        # The model's field names
        for sent, kept in (("email", "email_address"), ("slack_webhook", "slack_webhook_url")):
            if sent in attrs:
                attrs[kept] = attrs.pop(sent)
        return attrs


_NOTIFICATION_FIELDS = ("email_notification", "slack_notification", "email_address",
                        "slack_webhook_url")


def _settings_body(request) -> dict:
    roles = roles_for(request.user)
    profile = (UserProfile.objects.select_related("default_pool")
               .filter(user=request.user).first())
    default_pool = profile.default_pool if profile else None
    pools = pool_selectors.submittable_pool_names(roles=roles)
    return {
        "profile": {
            "username": request.user.get_username(),
            "email_notification": bool(profile and profile.email_notification),
            "slack_notification": bool(profile and profile.slack_notification),
            "email": (profile and profile.email_address) or request.user.email or None,
            "slack_webhook_set": bool(profile and profile.slack_webhook_url),
            # A default pool that was archived or is no longer visible is not offered.
            "pool": default_pool.name if default_pool and default_pool.name in pools else None,
        },
        "pools": pools,
        "roles": _role_names(request),
    }


_SETTINGS = inline_serializer("ProfileSettings", {
    "profile": inline_serializer("Profile", {
        "username": serializers.CharField(),
        "email_notification": serializers.BooleanField(),
        "slack_notification": serializers.BooleanField(),
        "email": serializers.CharField(allow_null=True),
        "slack_webhook_set": serializers.BooleanField(),
        "pool": serializers.CharField(allow_null=True)}),
    "pools": serializers.ListField(child=serializers.CharField()),
    "roles": serializers.ListField(child=serializers.CharField())})


class ProfileSettingsView(APIView):
    @extend_schema(responses=_SETTINGS,
                   summary="The caller's profile: default pool, pools it may submit to, roles")
    def get(self, request):
        return Response(_settings_body(request))

    @extend_schema(request=ProfileSettingsSerializer, responses=_SETTINGS,
                   summary="Set the caller's default pool and notifications")
    def post(self, request):
        body = ProfileSettingsSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        with transaction.atomic():  # all the settings sent, or none
            self._set(request, body.validated_data)
        return Response(_settings_body(request))

    @staticmethod
    def _set(request, validated: dict) -> None:
        if "pool" in validated:
            name = validated["pool"]
            pool = None
            if name:
                pool = pool_selectors.pool_get(name=name, roles=roles_for(request.user))
            services.profile_set_default_pool(user=request.user, pool=pool)
        notifications = {k: v for k, v in validated.items() if k in _NOTIFICATION_FIELDS}
        if notifications:
            services.profile_set_notifications(user=request.user, **notifications)
