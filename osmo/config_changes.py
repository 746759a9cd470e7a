"""OSMO's shape of a config write (`osmo config update`): the change itself, under `configs` or
`configs_dict` and validated by the endpoint's own body serializer, beside what its author
says of it (`description`, `tags`), which the revisions it writes carry."""

from __future__ import annotations

import re

from rest_framework import serializers

from . import config_history
from .serializers import RequestSerializer, StrictCharField

TAG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")


def tags_valid(tags: list[str]) -> list[str]:
    if len(tags) > config_history.TAGS_MAX:
        raise serializers.ValidationError(f"At most {config_history.TAGS_MAX} tags.")
    bad = [tag[:70] for tag in tags if not TAG_RE.match(tag)]
    if bad:
        raise serializers.ValidationError(
            f"Tags are 1-63 letters, digits, '.', '_' or '-': not {', '.join(bad)}.")
    return tags


class ConfigChangeSerializer(RequestSerializer):
    reject_unknown_fields = True
    payload_key = "configs"

    description = StrictCharField(required=False, allow_blank=True,
                                  max_length=config_history.DESCRIPTION_MAX,
                                  help_text="Why: recorded with the revision.")
    tags = serializers.ListField(child=StrictCharField(), required=False, default=list,
                                 max_length=config_history.TAGS_MAX)

    def validate_tags(self, tags: list[str]) -> list[str]:
        return tags_valid(tags)

    def note(self) -> config_history.Note:
        return config_history.Note(description=self.validated_data.get("description", ""),
                                   tags=tuple(self.validated_data["tags"]))


def is_osmo_change(data, payload_key: str) -> bool:
    """A body in OSMO's shape: an object with the payload key (never one of our fields)."""
    return isinstance(data, dict) and payload_key in data
