from django.apps import AppConfig


class WorkflowAppsConfig(AppConfig):
    name = "workflow_apps"
    verbose_name = "Workflow apps"

    def ready(self) -> None:
        from . import wiring  # the app registry is ready: wiring may import models

        wiring.connect()
