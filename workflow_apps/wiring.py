"""What the apps lend the workflows app below them: `workflows.ports.apps`, the app version a
submission names (`osmo.ports` lists every port). Connected by `WorkflowAppsConfig.ready()`."""

from __future__ import annotations

import uuid as uuid_module

from osmo.errors import OsmoError
from workflows import ports as workflow_ports

from . import selectors


class SubmittedApps:
    def app_version(self, *, app_uuid: str, version: int | None) -> tuple[str, str, int]:
        try:
            key = uuid_module.UUID(str(app_uuid))
        except ValueError:
            raise OsmoError("invalid_request", "app_uuid is not a uuid.",
                            errors={"app_uuid": ["not a uuid"]}) from None
        app = selectors.app_by_uuid(uuid=key)
        found = selectors.version_get(app=app, version=version)
        return str(app.uuid), app.name, found.version


def connect() -> None:
    workflow_ports.apps.provide(SubmittedApps())
