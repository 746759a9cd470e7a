from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "workflows"
    verbose_name = "Workflows"

    def ready(self) -> None:
        from . import wiring  # the app registry is ready: wiring may import models

        wiring.connect()
