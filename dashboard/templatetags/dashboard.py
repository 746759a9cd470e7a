"""Small template helpers: accessible widgets and moments in time."""

from datetime import UTC, datetime

from django import template
from django.utils.dateformat import format as date_format
from django.utils.dateparse import parse_datetime
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import mark_safe

register = template.Library()

WHEN_FORMAT = "j M Y, H:i:s"


@register.filter
def breakable(name: str):
    """A pool name that may wrap after its `--` (team--a), never between the two dashes."""
    return mark_safe('<span class="nowrap">--</span><wbr>'.join(
        conditional_escape(part) for part in str(name).split("--")))


@register.filter
def when(value, fmt: str = WHEN_FORMAT):
    """A moment as people read it (`26 Nov 2026, 15:36:53 UTC`; `fmt` is a Django date
    format), in a <time> whose `datetime` and hover title keep the exact ISO 8601 instant.
    Takes a datetime or an ISO string (the scheduler's status is JSON); "-" when unset."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if not isinstance(value, datetime):
        return "-"
    value = value.astimezone(UTC)
    exact = value.isoformat().replace("+00:00", "Z")
    return format_html('<time datetime="{}" title="{}">{} UTC</time>', exact, exact,
                       date_format(value, fmt))


@register.filter
def accessible(field):
    """The field's widget, described by its errors and help text (ids from _field.html)."""
    described_by = []
    if field.errors:
        described_by.append(f"{field.auto_id}-errors")
    if field.help_text:
        described_by.append(f"{field.auto_id}-help")
    attrs = {"aria-describedby": " ".join(described_by)} if described_by else {}
    if field.errors:
        attrs["aria-invalid"] = "true"
    return field.as_widget(attrs=attrs)
