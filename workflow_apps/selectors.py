"""Reads of apps. Every signed-in user may read every app (OSMO's apps are shared); only
the owner writes (services)."""

from __future__ import annotations

from django.db.models import Max, Q

from osmo.errors import NotFound

from .models import App, AppVersion, AppVersionStatus


def app_get(*, name: str) -> App:
    app = App.objects.select_related("owner").filter(name=name).first()
    if app is None:
        raise NotFound("app_not_found", f"App '{name}' does not exist.")
    return app


def app_by_uuid(*, uuid) -> App:
    app = App.objects.filter(uuid=uuid).first()
    if app is None:
        raise NotFound("app_not_found", f"No app has the uuid '{uuid}'.")
    return app


def version_get(*, app: App, version: int | None) -> AppVersion:
    """The version asked for, else the newest one; a deleted or unknown one is a 404."""
    ready = app.versions.filter(status=AppVersionStatus.READY)
    found = (ready.filter(version=version) if version is not None
             else ready.order_by("-version")).select_related("created_by").first()
    if found is None:
        raise NotFound("app_version_not_found",
                       f"App '{app.name}' has no version {version}." if version is not None
                       else f"App '{app.name}' has no version left.")
    return found


def versions_newest(*, app: App, limit: int, version: int | None = None) -> list[AppVersion]:
    rows = app.versions.select_related("created_by").order_by("-version")
    if version is not None:
        rows = rows.filter(version=version)
    return list(rows[:limit])


def apps_listed(*, actor, name: str | None, users: list[str], all_users: bool):
    """Apps with a version left, with their latest version: the caller's own (owned, or a
    version made) unless ``users`` or ``all_users`` say otherwise."""
    apps = (App.objects.select_related("owner")
            .annotate(latest_version=Max("versions__version",
                                         filter=Q(versions__status=AppVersionStatus.READY)))
            .filter(latest_version__isnull=False))
    if users:
        apps = apps.filter(owner__username__in=users)
    elif not all_users:
        apps = apps.filter(Q(owner=actor) | Q(pk__in=AppVersion.objects.filter(
            created_by=actor).values("app_id")))
    if name:
        apps = apps.filter(name__icontains=name)
    return apps.order_by("-created_at", "-id")
