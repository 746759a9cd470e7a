from django.apps import AppConfig

from osmo.observability.metrics import register_scrape_collector


class SchedulerConfig(AppConfig):
    name = "scheduler"
    verbose_name = "Scheduling and KAI objects"

    def ready(self) -> None:
        from . import wiring  # the app registry is ready: wiring may import models
        from .collectors import SchedulerCollector  # reads models: only once they are loaded

        wiring.connect()
        register_scrape_collector(SchedulerCollector())
