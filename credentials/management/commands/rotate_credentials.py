"""Seal every stored credential again under the first key of OSMO_CREDENTIAL_KEYS (a key
rotation's middle step: docs/CREDENTIALS.md)."""

from django.core.management.base import BaseCommand

from credentials import crypto, services


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument("--new-key", action="store_true",
                            help="only print a new key to put first in OSMO_CREDENTIAL_KEYS")

    def handle(self, *args, **options):
        if options["new_key"]:
            self.stdout.write(crypto.new_key())
            return
        count = services.credentials_rotate()
        self.stdout.write(f"Sealed {count} credential(s) under the first key.")
