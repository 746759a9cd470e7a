"""Django admin for pools: every write goes through pools.services, like the API.

The admin saves a pool and its subpool rows in one request transaction; a domain error from a
service (e.g. `quota_exceeds_parent`) rolls the whole save back and is shown as a message, so an
admin can neither break the quota invariant nor skip the audit trail.
"""

from __future__ import annotations

import json

from django import forms
from django.contrib import admin
from django.contrib import messages as admin_messages
from django.utils.html import format_html_join

from osmo.errors import OsmoError, flatten_errors
from osmo.serializers import RequestSerializer

from . import quota, services
from .api import serializers as shapes
from .models import Pool, PoolEvent, SubpoolState
from .selectors import usage_by_pool


class PlatformsField(forms.CharField):
    """Platforms as text, one per line: `name: description; label=value, label=value`
    (instead of raw JSON); the API's serializer still checks the result."""

    widget = forms.Textarea(attrs={"rows": 4, "cols": 80})

    def prepare_value(self, value):
        if isinstance(value, dict):
            return "\n".join(
                f"{name}: {spec.get('description', '')}; " + ", ".join(
                    f"{k}={v}" for k, v in (spec.get("node_selector") or {}).items())
                for name, spec in value.items())
        return value

    def to_python(self, value):
        if (value or "").strip()[:1] in ("{", "["):  # JSON, as the API takes it
            try:
                return json.loads(value)
            except ValueError as error:
                raise forms.ValidationError(f"Not valid JSON: {error}") from error
        platforms = {}
        for number, line in enumerate((value or "").splitlines(), start=1):
            if not line.strip():
                continue
            name, colon, rest = line.partition(":")
            description, _, selector = rest.partition(";")
            pairs = [pair.strip() for pair in selector.split(",") if pair.strip()]
            if not colon or not name.strip() or any("=" not in pair for pair in pairs):
                raise forms.ValidationError(
                    f"Line {number}: write `name: description; label=value, ...`.")
            platforms[name.strip()] = {
                "description": description.strip(),
                "node_selector": dict(pair.split("=", 1) for pair in pairs)}
        return platforms


def _change_lines(before: dict | None, after: dict | None) -> list[tuple[str, str, str]]:
    """(field, old, new) for every field an audit event changed."""
    before, after = before or {}, after or {}

    def shown(value) -> str:
        if value in (None, "", {}, []):
            return "-"
        return json.dumps(value, sort_keys=True) if isinstance(value, dict | list) else str(value)

    return [(key, shown(before.get(key)), shown(after.get(key)))
            for key in sorted(set(before) | set(after)) if before.get(key) != after.get(key)]


def _field_check(check, value, **kwargs):
    try:
        return check(value, **kwargs)
    except OsmoError as error:
        raise forms.ValidationError(error.detail) from error


class ServiceModelForm(forms.ModelForm):
    """A ModelForm that only shapes input: validation and saving belong to the services.

    The typed values also pass the API's request serializer (`shape`), so a service gets from the
    admin what it gets from the API: the same bounds, the same platforms shape.
    """

    shape: type[RequestSerializer]

    def _post_clean(self):
        pass

    def clean(self):
        cleaned = super().clean()
        fields = self.shape().fields
        checked = self.shape(data={f: v for f, v in cleaned.items() if f in fields},
                             partial=True)
        if not checked.is_valid():
            for path, messages in flatten_errors(checked.errors).items():
                field, _, inner = path.partition(".")
                self.add_error(field if field in self.fields else None,
                               [f"{inner}: {m}" if inner else m for m in messages])
        return cleaned


class PoolForm(ServiceModelForm):
    shape = shapes.PoolUpsertSerializer
    platforms = PlatformsField(required=False, help_text=(
        "One platform per line: `name: description; label=value, label=value` (the node "
        "labels its tasks select)."))

    class Meta:
        model = Pool
        fields = ["name", "quota_gpus", "limit_gpus", "weight", "priority", "description",
                  "platforms", "default_platform", "status"]

    def clean_name(self):
        return _field_check(services.validate_name, self.cleaned_data["name"])

    def clean_quota_gpus(self):
        return _field_check(services.validate_quota, self.cleaned_data["quota_gpus"])


class SubpoolForm(ServiceModelForm):
    shape = shapes.SubpoolUpdateSerializer
    delete_subpool = forms.BooleanField(
        required=False, label="Delete",
        help_text="Archive at once, or drain (DELETING) while workflows still run.")

    class Meta:
        model = Pool
        fields = ["subpool_name", "quota_gpus"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["subpool_name"].required = True
        state = self.instance.subpool_state if self.instance.pk else None
        if state is not None:
            self.fields["subpool_name"].disabled = True
        if state in (SubpoolState.DELETING, SubpoolState.ARCHIVED):
            for field in self.fields.values():
                field.disabled = True  # read-only: frozen while draining, kept for audit

    def clean_subpool_name(self):
        return _field_check(services.validate_name, self.cleaned_data["subpool_name"],
                            what="subpool")

    def clean_quota_gpus(self):
        return _field_check(services.validate_quota, self.cleaned_data["quota_gpus"])


class SubpoolInline(admin.TabularInline):
    model = Pool
    fk_name = "parent"
    form = SubpoolForm
    extra = 0
    can_delete = False
    verbose_name = "subpool"
    verbose_name_plural = "subpools"
    fields = ["subpool_name", "quota_gpus", "subpool_state", "usage", "delete_subpool"]
    readonly_fields = ["subpool_state", "usage"]
    ordering = ["subpool_name"]

    @admin.display(description="usage")
    def usage(self, subpool: Pool) -> str:
        if subpool.pk is None:
            return "-"
        if getattr(self, "_usage", None) is None:  # one aggregate for every row, not one per row
            self._usage = usage_by_pool(list(Pool.objects.filter(
                parent_id=subpool.parent_id).values_list("pk", flat=True)))
        held = self._usage.get(subpool.pk, quota.Usage())
        effective = quota.effective_quota(subpool.subpool_state, subpool.quota_gpus)
        return (f"{held.used_gpus} used, {held.total_usage_gpus - held.used_gpus} LOW, "
                f"{quota.available(effective, held.used_gpus)} available")

    def get_formset(self, request, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)
        refused = getattr(request, "osmo_refused", None)
        if refused is None or getattr(refused, "subpool_prefix", None) is None:
            return formset

        class RowRefused(formset.form):
            """The row whose save a service refused shows why, with the typed values."""

            def clean(self):
                cleaned = super().clean()
                if self.prefix == refused.subpool_prefix:
                    raise forms.ValidationError(f"Not saved: {refused.detail}")
                return cleaned

        formset.form = RowRefused
        return formset


class PoolEventInline(admin.TabularInline):
    model = PoolEvent
    fields = ["revision", "at", "actor_name", "action", "changes"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    max_num = 0
    ordering = ["-at"]
    verbose_name_plural = "history"

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="changes")
    def changes(self, event: PoolEvent):
        lines = _change_lines(event.before, event.after)
        return format_html_join("", "<div>{}: {} → {}</div>", lines) if lines else "-"


@admin.register(Pool)
class PoolAdmin(admin.ModelAdmin):
    form = PoolForm
    inlines = [SubpoolInline, PoolEventInline]
    list_display = ["name", "quota_gpus", "unallocated_gpus", "subpool_count", "status",
                    "archived"]
    list_filter = ["status"]
    search_fields = ["name", "description"]
    actions = ["archive_pools"]

    def get_queryset(self, request):
        return (super().get_queryset(request).filter(parent__isnull=True)
                .prefetch_related("subpools"))

    def get_readonly_fields(self, request, obj=None):
        if obj is not None and obj.archived_at is not None:
            return PoolForm.Meta.fields  # archived: read-only, reactivate through the API
        return ["name"] if obj else []

    @admin.display(description="unallocated GPUs")
    def unallocated_gpus(self, pool: Pool) -> int:
        return quota.unallocated(pool.quota_gpus, [(s.subpool_state, s.quota_gpus)
                                                   for s in pool.subpools.all()])

    @admin.display(description="subpools")
    def subpool_count(self, pool: Pool) -> int:
        return sum(s.subpool_state != SubpoolState.ARCHIVED for s in pool.subpools.all())

    @admin.display(boolean=True)
    def archived(self, pool: Pool) -> bool:
        return pool.archived_at is not None

    def has_delete_permission(self, request, obj=None):
        return False  # pools are archived (action below), never deleted

    def changeform_view(self, request, object_id=None, form_url="", extra_context=None):
        try:
            return super().changeform_view(request, object_id, form_url, extra_context)
        except OsmoError as error:
            # The admin's transaction was rolled back: nothing is saved. The same POST is shown
            # again, the typed values kept and the refusal on its row (or on the form).
            request.osmo_refused = error
            return super().changeform_view(request, object_id, form_url, extra_context)

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change, **kwargs)
        refused = getattr(request, "osmo_refused", None)
        if refused is None or getattr(refused, "subpool_prefix", None) is not None:
            return form

        class Refused(form):
            def clean(self):
                super().clean()
                raise forms.ValidationError(f"Not saved: {refused.detail}")

        return Refused

    def save_model(self, request, obj, form, change):
        data = dict(form.cleaned_data)
        name = obj.name if change else data.pop("name")
        data.pop("name", None)
        saved, _ = services.pool_upsert(actor=request.user, name=name, **data)
        obj.pk, obj.name = saved.pk, saved.name

    def save_formset(self, request, form, formset, change):
        # The admin's change log reads these; the audit trail is PoolEvent.
        formset.new_objects, formset.changed_objects, formset.deleted_objects = [], [], []
        if formset.model is not Pool:
            return
        parent = Pool.objects.get(pk=form.instance.pk)
        # Shrinks and deletes first, so that quota they free is available to growth in the same
        # save, as an admin moving GPUs between subpools would expect.
        def order(subform):
            instance = subform.instance
            new_quota = subform.cleaned_data.get("quota_gpus")
            frees = subform.cleaned_data.get("delete_subpool") or (
                instance.pk and new_quota is not None and new_quota < instance.quota_gpus)
            return 0 if frees else 1

        for subform in sorted(formset.forms, key=order):
            data = subform.cleaned_data
            if not data or not subform.has_changed():
                continue
            try:
                self._save_subpool(request, parent, subform.instance, data)
            except OsmoError as error:
                error.subpool_prefix = subform.prefix  # shown on that row
                raise

    def _save_subpool(self, request, parent: Pool, instance: Pool, data: dict) -> None:
        if instance.pk is None:
            services.subpool_create(actor=request.user, parent=parent,
                                    subpool_name=data["subpool_name"],
                                    quota_gpus=data["quota_gpus"])
        elif data.get("delete_subpool"):
            services.subpool_delete(actor=request.user, subpool=instance)
        elif instance.subpool_state == SubpoolState.ACTIVE:
            services.subpool_update(actor=request.user, subpool=instance,
                                    quota_gpus=data["quota_gpus"])

    @admin.action(description="Archive selected pools (refused while in use)")
    def archive_pools(self, request, queryset):
        for pool in queryset:
            try:
                services.pool_delete(actor=request.user, pool=pool)
                self.message_user(request, f"Archived {pool.name}.")
            except OsmoError as error:
                self.message_user(request, error.detail, admin_messages.ERROR)
