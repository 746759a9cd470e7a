"""Django admin for backends: every write goes through `scheduler/backends/services.py`, like
the API, and the typed values pass the API's request serializer first (`pools.admin`'s way)."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin
from django.contrib import messages as admin_messages
from django.utils import timezone

from osmo.errors import OsmoError
from pools.admin import ServiceModelForm

from .api import backend_serializers as shapes
from .backends import liveness, services
from .models import Backend

_FIELDS = ["name", "kind", "placement", "k8s_namespace", "scheduler_name", "description",
           "maintenance"]


class BackendForm(ServiceModelForm):
    shape = shapes.BackendUpsertSerializer

    class Meta:
        model = Backend
        fields = _FIELDS

    def clean_name(self):
        try:
            return services.validate_name(self.cleaned_data["name"])
        except OsmoError as error:
            raise forms.ValidationError(error.detail) from error


@admin.register(Backend)
class BackendAdmin(admin.ModelAdmin):
    form = BackendForm
    list_display = ["name", "kind", "placement", "status", "last_heartbeat", "k8s_uid"]
    readonly_fields = ["k8s_uid", "version", "last_heartbeat", "created_date"]
    actions = ["delete_backends"]

    def get_readonly_fields(self, request, obj=None):
        # A backend's name is its identity (pools and nodes refer to it): never renamed.
        return [*self.readonly_fields, "name"] if obj else self.readonly_fields

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # deletes go through the service (below)
        return actions

    @admin.display(description="status")
    def status(self, backend: Backend) -> str:
        return liveness.backend_status(kind=backend.kind, maintenance=backend.maintenance,
                                       last_heartbeat=backend.last_heartbeat,
                                       now=timezone.now(),
                                       lease_seconds=settings.OSMO_BACKEND_LEASE)

    def save_model(self, request, obj, form, change):
        data = dict(form.cleaned_data)
        name = obj.name if change else data.pop("name")
        data.pop("name", None)
        # One change, one revision: the maintenance flag goes with the other fields.
        saved, _ = services.backend_upsert(actor=request.user, name=name,
                                           maintenance=data.pop("maintenance", False), **data)
        obj.pk, obj.name = saved.pk, saved.name

    def delete_model(self, request, obj):
        services.backend_delete(actor=request.user, backend=obj)

    def delete_view(self, request, object_id, extra_context=None):
        try:
            return super().delete_view(request, object_id, extra_context)
        except OsmoError as error:
            self.message_user(request, error.detail, admin_messages.ERROR)
            return self.changeform_view(request, object_id)

    @admin.action(description="Delete selected backends (refused while in use)")
    def delete_backends(self, request, queryset):
        for backend in queryset:
            try:
                services.backend_delete(actor=request.user, backend=backend)
                self.message_user(request, f"Deleted {backend.name}.")
            except OsmoError as error:
                self.message_user(request, error.detail, admin_messages.ERROR)
