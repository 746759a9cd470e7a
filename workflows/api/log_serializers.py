"""Query shapes of a workflow's logs and events (docs/API-OSMO-CLIENT.md "Logs and events")."""

from __future__ import annotations

from rest_framework import serializers

from osmo.serializers import QueryBooleanField, RequestSerializer

from ..logreads import QUERY_MAX_CHARS

MAX_LAST_N_LINES = 1_000_000
MAX_RETRY_ID = 2**31 - 1  # the database's column


class OptionalFlag(QueryBooleanField):
    default_empty_html = None  # absent: the server decides (follow while the task runs)


class EventsQuerySerializer(RequestSerializer):
    task_name = serializers.CharField(required=False, max_length=63,
                                      help_text="One task's events (and the workflow's own).")
    retry_id = serializers.IntegerField(
        required=False, min_value=0, max_value=MAX_RETRY_ID,
        help_text="A run of the task's group (0, then one more for each reschedule by an exit "
                  "action); logs: that run's lines only (default: the latest run); events: "
                  "that run's events of the task only (default: every run's and the "
                  "workflow's own). Needs task_name.")


class LogsQuerySerializer(EventsQuerySerializer):
    last_n_lines = serializers.IntegerField(required=False, min_value=1,
                                            max_value=MAX_LAST_N_LINES,
                                            help_text="Only the last N lines.")
    query = serializers.CharField(required=False, max_length=QUERY_MAX_CHARS,
                                  trim_whitespace=False,
                                  help_text="Only lines matching this regular expression "
                                            "(RE2 syntax: no backreferences).")
    follow = OptionalFlag(required=False, allow_null=True,
                          help_text="Keep the response open and send new lines while the "
                                    "task runs (default: true while it runs).")
    download = QueryBooleanField(required=False, default=False,
                                 help_text="As an attachment, and never followed.")
