from django.core.management.base import BaseCommand
from django.db import transaction

from osmo.accounts import services


class Command(BaseCommand):
    help = "Create USERNAME if missing, add it to groups, and print a new raw token (only line)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--superuser", action="store_true")
        parser.add_argument("--group", action="append", default=[], dest="groups",
                            help="A Django group (role), e.g. osmo-admin; repeat for several.")
        parser.add_argument("--revoke-all", action="store_true",
                            help="Revoke every token of the user instead of issuing one.")

    def handle(self, *args, username, superuser, groups, revoke_all, **options):
        with transaction.atomic():
            user = services.user_ensure(username=username, superuser=superuser, groups=groups)
            if revoke_all:
                count = services.tokens_revoke_all(user=user)
                self.stderr.write(f"revoked {count} token(s) of {username}")
                return
            raw = services.token_issue(user=user)
        self.stdout.write(raw)
