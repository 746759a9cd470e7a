from django.apps import AppConfig


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "Scheduling and KAI objects"

    def ready(self) -> None:
        from . import wiring  # the app registry is ready: wiring may import models

        wiring.connect()
