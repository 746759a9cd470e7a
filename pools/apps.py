from django.apps import AppConfig

from osmo.observability.metrics import register_scrape_collector


class PoolsConfig(AppConfig):
    name = "pools"
    verbose_name = "Pools and subpools"

    def ready(self) -> None:
        from .collectors import PoolsCollector  # reads models: only once they are loaded

        register_scrape_collector(PoolsCollector())
