"""Shapes of `/api/configs/history`, `/api/configs/diff` and the rollback (OSMO's config
history for POOL and BACKEND): the queries and the body validate; responses are plain dicts
built here, described for the OpenAPI document by the serializers below."""

from __future__ import annotations

import datetime as dt

from rest_framework import serializers

from osmo import config_history
from osmo.config_changes import tags_valid
from osmo.serializers import (
    QueryBooleanField,
    QueryIntegerField,
    RequestSerializer,
    StrictCharField,
    StrictIntegerField,
)

from ..configs.selectors import HistoryQuery

# A page without the configs may hold OSMO's 1000 rows; each row with its type's whole
# config costs a read of that config, so such a page holds 20.
MAX_LIMIT = 1000
MAX_LIMIT_WITH_DATA = 20
MAX_OFFSET = 1_000_000
SYSTEM = "(system)"  # the author of a change no user made (no username has parentheses)


class ConfigTypeField(serializers.ChoiceField):
    """POOL or BACKEND, in any case (OSMO's client sends them upper-case); as a filter, OSMO's
    other type names too (`also_osmo`), which match no revision here."""

    def __init__(self, *, also_osmo: bool = False, **kwargs):
        self.accepted = config_history.CONFIG_TYPES + (
            config_history.OSMO_CONFIG_TYPES if also_osmo else ())
        super().__init__(choices=self.accepted, **kwargs)

    def to_internal_value(self, data):
        if isinstance(data, str):
            data = data.upper()
        if data not in self.accepted:
            raise serializers.ValidationError(
                f"Config history is kept for {' and '.join(config_history.CONFIG_TYPES)} "
                f"here, not {str(data)[:40]!r}.")
        return data


class HistoryQuerySerializer(RequestSerializer):
    config_types = serializers.ListField(
        child=ConfigTypeField(also_osmo=True), required=False, max_length=20,
        help_text="POOL, BACKEND (repeat it); none: both. OSMO's other types match nothing.")
    name = StrictCharField(required=False, max_length=82,
                           help_text="Only the revisions of this pool, subpool or backend.")
    revision = QueryIntegerField(required=False, min_value=1)
    tags = serializers.ListField(child=StrictCharField(max_length=63), required=False,
                                 max_length=config_history.TAGS_MAX,
                                 help_text="Only revisions carrying every one of these tags.")
    created_before = serializers.DateTimeField(required=False)
    created_after = serializers.DateTimeField(required=False)
    at_timestamp = serializers.DateTimeField(
        required=False, help_text="Each type's revision in force at this time (one a type).")
    order = serializers.ChoiceField(choices=["ASC", "DESC", "asc", "desc"], required=False,
                                    default="ASC", help_text="Order of the page by time.")
    offset = QueryIntegerField(required=False, default=0, min_value=0, max_value=MAX_OFFSET,
                               help_text="Skip this many of the newest revisions.")
    limit = QueryIntegerField(required=False, default=20, min_value=1, max_value=MAX_LIMIT,
                              help_text=f"At most {MAX_LIMIT} revisions a page; "
                                        f"{MAX_LIMIT_WITH_DATA} with their configs.")
    omit_data = QueryBooleanField(required=False, default=False,
                                  help_text="Leave out each revision's whole config (`data`).")

    def validate(self, attrs):
        if attrs.get("at_timestamp") and (attrs.get("created_before")
                                          or attrs.get("created_after")):
            raise serializers.ValidationError(
                {"at_timestamp": ["Not with created_before or created_after."]})
        if not attrs["omit_data"] and attrs["limit"] > MAX_LIMIT_WITH_DATA:
            raise serializers.ValidationError(
                {"limit": [f"At most {MAX_LIMIT_WITH_DATA} revisions a page with their "
                           f"configs; ask with omit_data=true for up to {MAX_LIMIT}."]})
        return attrs

    def query(self) -> HistoryQuery:
        data = self.validated_data
        asked = data.get("config_types") or config_history.CONFIG_TYPES
        types = tuple(t for t in config_history.CONFIG_TYPES if t in asked)
        return HistoryQuery(
            config_types=types, name=data.get("name"), revision=data.get("revision"),
            tags=tuple(data.get("tags") or ()), created_before=data.get("created_before"),
            created_after=data.get("created_after"), at_timestamp=data.get("at_timestamp"),
            descending=data["order"].upper() == "DESC", offset=data["offset"],
            limit=data["limit"])


class DiffQuerySerializer(RequestSerializer):
    config_type = ConfigTypeField()
    first_revision = QueryIntegerField(min_value=1, max_value=2**31 - 1)
    second_revision = QueryIntegerField(min_value=1, max_value=2**31 - 1)


class RollbackSerializer(RequestSerializer):
    config_type = ConfigTypeField()
    revision = StrictIntegerField(min_value=1, max_value=2**31 - 1,
                                  help_text="The revision whose item goes back to the config "
                                            "it recorded.")
    description = StrictCharField(required=False, allow_blank=True,
                                  max_length=config_history.DESCRIPTION_MAX)
    tags = serializers.ListField(child=StrictCharField(), required=False, default=list,
                                 max_length=config_history.TAGS_MAX)

    def validate_tags(self, tags: list[str]) -> list[str]:
        return tags_valid(tags)


class TagsSerializer(RequestSerializer):
    set_tags = serializers.ListField(child=StrictCharField(), required=False, default=list,
                                     max_length=config_history.TAGS_MAX)
    delete_tags = serializers.ListField(child=StrictCharField(), required=False, default=list,
                                        max_length=config_history.TAGS_MAX)

    def validate_set_tags(self, tags: list[str]) -> list[str]:
        return tags_valid(tags)

    def validate(self, attrs):
        if not attrs["set_tags"] and not attrs["delete_tags"]:
            raise serializers.ValidationError(
                {"set_tags": ["Give set_tags or delete_tags (or both)."]})
        return attrs


# --- responses -------------------------------------------------------------------------------

def utc_text(value: dt.datetime) -> str:
    """UTC without an offset, as OSMO writes times (its client parses no other form)."""
    return value.astimezone(dt.UTC).replace(tzinfo=None).isoformat()


def revision_object(row: dict, data=None) -> dict:
    """One revision as OSMO's history lists it, with what changed (`after`: the item's whole
    config after the change, null when it was deleted; `diff`: field by field)."""
    return {"config_type": row["config_type"], "name": row["item"],
            "revision": row["revision"], "username": row["actor_name"] or SYSTEM,
            "created_at": utc_text(row["at"]), "description": row["description"],
            "tags": list(row["tags"]), "action": row["action"], "after": row["after"],
            "diff": config_history.diff(row["before"], row["after"]), "data": data}


class FieldChangeSerializer(serializers.Serializer):
    before = serializers.JSONField(allow_null=True)
    after = serializers.JSONField(allow_null=True)


class RevisionSerializer(serializers.Serializer):
    config_type = serializers.ChoiceField(choices=config_history.CONFIG_TYPES)
    name = serializers.CharField(help_text="The pool, subpool or backend that changed.")
    revision = serializers.IntegerField(help_text="Counted per config type, from 1.")
    username = serializers.CharField(help_text=f"Who changed it; {SYSTEM} for the service.")
    created_at = serializers.CharField(help_text="UTC, ISO 8601 without an offset.")
    description = serializers.CharField()
    tags = serializers.ListField(child=serializers.CharField())
    action = serializers.CharField(help_text="e.g. pool_updated, subpool_quota_changed, "
                                             "backend_deleted.")
    after = serializers.JSONField(allow_null=True)
    diff = serializers.DictField(child=FieldChangeSerializer())
    data = serializers.JSONField(allow_null=True, help_text="The type's whole config at this "
                                                            "revision; null with omit_data.")


class HistorySerializer(serializers.Serializer):
    configs = RevisionSerializer(many=True)


class DiffSerializer(serializers.Serializer):
    first_data = serializers.JSONField()
    second_data = serializers.JSONField()
    diff = serializers.DictField(child=serializers.DictField(child=FieldChangeSerializer()),
                                 help_text="Name → field → {before, after}.")
