"""Small template helpers: accessible widgets and signed GPU figures."""

from django import template

register = template.Library()


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
