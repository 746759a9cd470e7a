"""`/api/app...` in OSMO's shapes (docs/API-OSMO-CLIENT.md "Apps"): shape and permissions;
writes go to services."""

from __future__ import annotations

import datetime as dt
import re

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from osmo.errors import OsmoError
from osmo.parsers import BoundedJSONParser
from osmo.serializers import INT32_MAX, RequestSerializer
from workflows.api.parsers import TextYAMLParser, XYAMLParser, YAMLTextParser

from .. import selectors, services
from .plain import PlainTextParser

APP_NAME = re.compile(r"^[a-zA-Z]([a-zA-Z0-9_-]*[a-zA-Z0-9])?$")
BODY_PARSERS = [BoundedJSONParser, YAMLTextParser, TextYAMLParser, XYAMLParser, PlainTextParser]
ORDERS = ("ASC", "DESC")


def _iso(value) -> str:
    return value.astimezone(dt.UTC).replace(tzinfo=None).isoformat()


def _app_name(name: object, field: str = "name") -> str:
    if not isinstance(name, str) or len(name) > 63 or not APP_NAME.match(name):
        raise OsmoError("invalid_name", "An app name is a letter, then letters, digits, '-' or "
                        "'_', ending in a letter or a digit, at most 63 characters.",
                        errors={field: ["not an app name"]})
    return name


def _text_body(request, field: str = "body") -> str:
    """The body as text: a JSON string (NVIDIA's client) or the text itself."""
    data = request.data
    if isinstance(data, str):
        return data
    raise OsmoError("invalid_request", "Send the text as a JSON string or as text/yaml.",
                    errors={field: ["text"]})


def version_entry(version) -> dict:
    return {"version": version.version, "created_by": version.created_by.get_username(),
            "created_date": _iso(version.created_at), "status": version.status}


class AppListQuery(RequestSerializer):
    name = serializers.CharField(required=False, max_length=63)
    users = serializers.ListField(child=serializers.CharField(max_length=150), required=False,
                                  default=list, max_length=50)
    all_users = serializers.BooleanField(required=False, default=False)
    offset = serializers.IntegerField(required=False, default=0, min_value=0,
                                      max_value=INT32_MAX)
    limit = serializers.IntegerField(required=False, default=20, min_value=1, max_value=1000)
    order = serializers.ChoiceField(choices=ORDERS, required=False, default="ASC")


class AppInfoQuery(RequestSerializer):
    version = serializers.IntegerField(required=False, min_value=1, max_value=INT32_MAX)
    limit = serializers.IntegerField(required=False, default=20, min_value=1, max_value=1000)
    order = serializers.ChoiceField(choices=ORDERS, required=False, default="ASC")


class AppCreateQuery(RequestSerializer):
    description = serializers.CharField(required=False, default="", allow_blank=True,
                                        max_length=1024)


class AppVersionQuery(RequestSerializer):
    version = serializers.IntegerField(required=False, min_value=1, max_value=INT32_MAX)


class AppDeleteQuery(AppVersionQuery):
    all_versions = serializers.BooleanField(required=False, default=False)


class AppListView(APIView):
    @extend_schema(parameters=[AppListQuery], responses=dict,
                   summary="Apps: yours by default, or those of `users`, or all")
    def get(self, request):
        query = AppListQuery.validated_query(request.query_params)
        apps = selectors.apps_listed(actor=request.user, name=query.get("name"),
                                     users=query["users"], all_users=query["all_users"])
        offset, limit = query["offset"], query["limit"]
        page = list(apps[offset:offset + limit + 1])
        more = len(page) > limit
        page = page[:limit]
        if query["order"] == "ASC":  # the newest page, oldest first (OSMO's reading)
            page.reverse()
        return Response({"apps": [{
            "uuid": str(app.uuid), "name": app.name, "description": app.description,
            "created_date": _iso(app.created_at), "owner": app.owner.get_username(),
            "latest_version": str(app.latest_version)} for app in page],
            "more_entries": more})


class AppDetailView(APIView):
    parser_classes = BODY_PARSERS

    @extend_schema(parameters=[AppInfoQuery], responses=dict,
                   summary="An app and its newest versions")
    def get(self, request, name: str):
        query = AppInfoQuery.validated_query(request.query_params)
        app = selectors.app_get(name=name)
        if query.get("version") is not None:
            selectors.version_get(app=app, version=query["version"])  # 404 when unknown
        versions = selectors.versions_newest(app=app, limit=query["limit"],
                                             version=query.get("version"))
        if query["order"] == "ASC":
            versions.reverse()
        return Response({"uuid": str(app.uuid), "name": app.name,
                         "description": app.description, "created_date": _iso(app.created_at),
                         "owner": app.owner.get_username(),
                         "versions": [version_entry(v) for v in versions]})

    @extend_schema(parameters=[AppCreateQuery], request={"application/json": str},
                   responses=dict, summary="Create an app with its first version")
    def post(self, request, name: str):
        query = AppCreateQuery.validated_query(request.query_params)
        version = services.app_create(actor=request.user, name=_app_name(name),
                                      description=query["description"],
                                      spec=_text_body(request))
        return Response(_edit_entry(version), status=201)

    @extend_schema(request={"application/json": str}, responses=dict,
                   summary="Add a version to your app")
    def patch(self, request, name: str):
        version = services.app_update(actor=request.user, name=name, spec=_text_body(request))
        return Response(_edit_entry(version))

    @extend_schema(parameters=[AppDeleteQuery], request=None, responses=dict,
                   summary="Delete a version of your app, or all of them")
    def delete(self, request, name: str):
        query = AppDeleteQuery.validated_query(request.query_params)
        if (query.get("version") is None) == (not query["all_versions"]):
            raise OsmoError("invalid_request", "Give a version or all_versions=true, not both.",
                            errors={"version": ["a version or all_versions"]})
        deleted = services.app_delete(actor=request.user, name=name,
                                      version=query.get("version"),
                                      all_versions=query["all_versions"])
        return Response({"versions": deleted})


def _edit_entry(version) -> dict:
    return {"uuid": str(version.app.uuid), "version": version.version, "name": version.app.name,
            "created_by": version.created_by.get_username(),
            "created_date": _iso(version.created_at)}


class AppSpecView(APIView):
    @extend_schema(parameters=[AppVersionQuery], responses={(200, "text/plain"): str},
                   summary="An app version's spec, as text (the newest without `version`)")
    def get(self, request, name: str):
        query = AppVersionQuery.validated_query(request.query_params)
        version = selectors.version_get(app=selectors.app_get(name=name),
                                        version=query.get("version"))
        return HttpResponse(version.spec, content_type="text/plain; charset=utf-8")


class AppRenameView(APIView):
    parser_classes = [BoundedJSONParser, PlainTextParser]

    @extend_schema(request={"application/json": str}, responses=str,
                   summary="Rename your app; answers the new name")
    def post(self, request, name: str):
        new_name = _app_name(_text_body(request, "new_name").strip(), "new_name")
        app = services.app_rename(actor=request.user, name=name, new_name=new_name)
        return Response(app.name)
