from django.core.management.base import BaseCommand

from osmo import process_gc
from osmo.observability.server import serve_if_configured
from scheduler.backends.embedded.loop import SchedulerLoop


class Command(BaseCommand):
    help = ("Run the scheduling loop every OSMO_SCHEDULER_INTERVAL seconds (0: only on request). "
            "One instance is active at a time; others wait and take over.")

    def add_arguments(self, parser):
        parser.add_argument("--interval", type=float, default=None)

    def handle(self, *args, interval, **options):
        serve_if_configured()
        process_gc.settle(busy=True)
        SchedulerLoop(interval=interval).run()
