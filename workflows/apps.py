from django.apps import AppConfig

from osmo.observability.metrics import register_scrape_collector


class WorkflowsConfig(AppConfig):
    name = "workflows"
    verbose_name = "Workflows"

    def ready(self) -> None:
        from . import wiring  # the app registry is ready: wiring may import models
        from .collectors import WorkflowsCollector  # reads models: only once they are loaded

        wiring.connect()
        register_scrape_collector(WorkflowsCollector())
