"""Every write of an app. A spec is checked as a submission would parse it (templates
rendered with their defaults) before anything is stored."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.db.models import Max

from osmo.errors import Conflict, Forbidden, OsmoError
from osmo.limits import input_limits
from workflows.spec import SpecError, parse_workflow_spec

from .models import App, AppVersion, AppVersionStatus
from .selectors import app_get


def check_spec(text: str) -> None:
    """400 `invalid_spec` for a spec no pool could parse (any platform name is allowed: the
    pool is chosen at submission)."""
    if not isinstance(text, str) or not text.strip():
        raise OsmoError("invalid_spec", "The app's spec is empty.", errors={"body": ["empty"]})
    try:
        parse_workflow_spec(text, validate_scheduling=False, limits=input_limits())
    except SpecError as error:
        raise OsmoError(getattr(error, "code", "invalid_spec"), "The app's spec is not valid: "
                        + "; ".join(f"{path}: {messages[0]}"
                                    for path, messages in list(error.errors.items())[:3]),
                        errors={path: list(messages) for path, messages in error.errors.items()}
                        ) from error


def _owned(app: App, actor, doing: str) -> None:
    if app.owner_id != actor.pk:
        raise Forbidden(f"Only the app's owner ({app.owner.get_username()}) can {doing} it.")


@transaction.atomic
def app_create(*, actor, name: str, description: str, spec: str) -> AppVersion:
    check_spec(spec)
    try:
        with transaction.atomic():
            app = App.objects.create(name=name, owner=actor, description=description)
    except IntegrityError:
        raise Conflict("app_exists", f"App '{name}' exists already; `osmo app update` adds "
                                     "a version.") from None
    return AppVersion.objects.create(app=app, version=1, spec=spec, created_by=actor)


@transaction.atomic
def app_update(*, actor, name: str, spec: str) -> AppVersion:
    """A new version, numbered after every version ever made (deleted ones included)."""
    check_spec(spec)
    app = App.objects.select_for_update().select_related("owner").filter(name=name).first()
    if app is None:
        app_get(name=name)  # the 404
    _owned(app, actor, "update")
    newest = app.versions.aggregate(newest=Max("version"))["newest"] or 0
    return AppVersion.objects.create(app=app, version=newest + 1, spec=spec, created_by=actor)


@transaction.atomic
def app_delete(*, actor, name: str, version: int | None, all_versions: bool) -> list[int]:
    """The versions deleted (their specs emptied; their numbers are never given again)."""
    app = app_get(name=name)
    _owned(app, actor, "delete")
    rows = app.versions.select_for_update().filter(status=AppVersionStatus.READY)
    if not all_versions:
        rows = rows.filter(version=version)
        if not rows.exists():
            raise OsmoError("app_version_not_found",
                            f"App '{name}' has no version {version}.", status_code=404)
    deleted = sorted(rows.values_list("version", flat=True))
    app.versions.filter(version__in=deleted).update(status=AppVersionStatus.DELETED, spec="")
    return deleted


@transaction.atomic
def app_rename(*, actor, name: str, new_name: str) -> App:
    app = App.objects.select_for_update().select_related("owner").filter(name=name).first()
    if app is None:
        app_get(name=name)
    _owned(app, actor, "rename")
    if App.objects.filter(name=new_name).exists():
        raise Conflict("app_exists", f"App '{new_name}' exists already.")
    app.name = new_name
    app.save(update_fields=["name"])
    return app
