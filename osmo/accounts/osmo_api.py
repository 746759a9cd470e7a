"""Users and access tokens as NVIDIA's OSMO client asks for them (docs/API-OSMO-CLIENT.md):
`osmo user list|get` and `osmo token set|list|delete`, tokens known by name. Roles here are
the user's groups; a token carries its user's roles (OSMO's per-token roles are refused)."""

from __future__ import annotations

import datetime as dt
import re

from django.contrib.auth import get_user_model
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo.errors import Forbidden, NotFound, RequestInvalid
from osmo.serializers import RequestSerializer

from . import selectors, services
from .api import AccessTokenDetailView, AccessTokenSerializer, token_object
from .roles import roles_for

TOKEN_NAME = r"^[a-zA-Z]([a-zA-Z0-9_-]*[a-zA-Z0-9])?$"  # OSMO's TOKEN_NAME_REGEX
MAX_TOKEN_DAYS = 3650


def _iso(value) -> str | None:
    return value.astimezone(dt.UTC).replace(tzinfo=None).isoformat() if value else None


def _user_or_404(actor, user_id: str):
    """The user, for a platform admin or the user themself; anyone else gets 404."""
    user = get_user_model().objects.filter(username=user_id).first()
    if user is None or (user.pk != actor.pk and not roles_for(actor).platform_admin):
        raise NotFound("user_not_found", f"User '{user_id}' does not exist.")
    return user


class UserListQuerySerializer(RequestSerializer):
    count = serializers.IntegerField(required=False, default=100, min_value=1, max_value=1000)
    id_prefix = serializers.CharField(required=False, max_length=150)
    roles = serializers.ListField(child=serializers.CharField(max_length=150), required=False,
                                  default=list, max_length=50)


class UserListView(APIView):
    @extend_schema(parameters=[UserListQuerySerializer], responses=dict,
                   operation_id="api_auth_user_list",
                   summary="Users (platform admins), the OSMO client's `user list`")
    def get(self, request):
        if not roles_for(request.user).platform_admin:
            raise Forbidden("Only platform admins list users.")
        query = UserListQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        users = get_user_model().objects.order_by("username")
        if query.validated_data.get("id_prefix"):
            users = users.filter(username__startswith=query.validated_data["id_prefix"])
        if query.validated_data["roles"]:
            users = users.filter(groups__name__in=query.validated_data["roles"]).distinct()
        page = users[:query.validated_data["count"]]
        return Response({"users": [{"id": u.get_username(), "created_at": _iso(u.date_joined),
                                    "created_by": None} for u in page],
                         "total_results": users.count()})


class UserDetailView(APIView):
    @extend_schema(responses=dict, summary="One user and their roles (themself, or any user "
                                           "for platform admins)")
    def get(self, request, user_id: str):
        user = _user_or_404(request.user, user_id)
        return Response({"id": user.get_username(), "created_at": _iso(user.date_joined),
                         "created_by": None, "roles": _roles(user)})


def _roles(user) -> list[dict]:
    """The user's groups as OSMO's role assignments (who and when are not recorded here)."""
    names = sorted(user.groups.values_list("name", flat=True))
    if user.is_superuser:
        names.insert(0, "superuser")
    return [{"role_name": name, "assigned_by": None, "assigned_at": None} for name in names]


class TokenRolesView(APIView):
    @extend_schema(responses=dict, summary="The roles a named token carries (its user's)")
    def get(self, request, name: str):
        token = selectors.token_by_name(actor=request.user, name=name)
        return Response({"token_name": token.name, "user_name": token.user.get_username(),
                         "roles": _roles(token.user)})


class TokenSetQuerySerializer(RequestSerializer):
    expires_at = serializers.DateField(required=False, help_text="The day it stops working "
                                                                  "(UTC); default: never.")
    description = serializers.CharField(required=False, default="", allow_blank=True,
                                        max_length=200)
    roles = serializers.ListField(child=serializers.CharField(max_length=150), required=False,
                                  default=list, max_length=0,
                                  help_text="Not supported: a token has its user's roles.")

    def validate_expires_at(self, value: dt.date) -> dt.date:
        today = dt.datetime.now(dt.UTC).date()
        if value <= today or value > today + dt.timedelta(days=MAX_TOKEN_DAYS):
            raise serializers.ValidationError(
                f"A day after today and within {MAX_TOKEN_DAYS} days.")
        return value


def _check_name(name: str) -> None:
    if len(name) > 100 or not re.fullmatch(TOKEN_NAME, name):
        raise RequestInvalid({"name": ["Letters, digits, - and _ (a letter first, at most "
                                       "100)."]})


class NamedTokenView(APIView):
    """`osmo token set|delete NAME [--user U]`."""

    @extend_schema(request=None, parameters=[TokenSetQuerySerializer], responses=str,
                   operation_id="api_auth_access_token_named_create",
                   summary="Create a named access token; the answer is the token (shown once)")
    def post(self, request, name: str, user_id: str | None = None):
        _check_name(name)
        query = TokenSetQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        expires = query.validated_data.get("expires_at")
        _, raw = services.token_create(
            actor=request.user, username=user_id, name=name,
            description=query.validated_data["description"], unique_name=True,
            expires_at=dt.datetime.combine(expires, dt.time(), dt.UTC) if expires else None)
        return Response(raw)

    @extend_schema(request=None, responses={200: dict},
                   operation_id="api_auth_access_token_named_destroy",
                   summary="Revoke the named access token")
    def delete(self, request, name: str, user_id: str | None = None):
        token = selectors.token_by_name(actor=request.user, username=user_id, name=name)
        services.token_revoke(actor=request.user, token=token)
        return Response({"name": name, "revoked": True})


class TokenByIdView(AccessTokenDetailView):
    """`/api/auth/access_token/<digits>`: a DELETE revokes by id; a POST is `osmo token set`
    of a name of digits only, which is refused as a name (400), not as a method (405)."""

    @extend_schema(exclude=True)
    def post(self, request, token_id: int):
        return NamedTokenView.post(self, request, str(token_id))


class UserNamedTokenView(NamedTokenView):
    """The same for another user's tokens (platform admins)."""

    @extend_schema(request=None, parameters=[TokenSetQuerySerializer], responses=str,
                   operation_id="api_auth_user_access_token_named_create",
                   summary="Create a named access token for a user (platform admins)")
    def post(self, request, name: str, user_id: str | None = None):
        return super().post(request, name, user_id)

    @extend_schema(request=None, responses={200: dict},
                   operation_id="api_auth_user_access_token_named_destroy",
                   summary="Revoke a user's named access token (platform admins)")
    def delete(self, request, name: str, user_id: str | None = None):
        return super().delete(request, name, user_id)


class UserTokenListView(APIView):
    @extend_schema(responses=AccessTokenSerializer(many=True),
                   summary="A user's live access tokens (platform admins)")
    def get(self, request, user_id: str):
        tokens = selectors.tokens_visible(actor=request.user, username=user_id)
        return Response([token_object(token) for token in tokens])
