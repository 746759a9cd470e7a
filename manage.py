#!/usr/bin/env python
"""Django's command-line utility. Without DATABASE_URL it uses the embedded PostgreSQL."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "osmo.settings")
    from osmo.embedded import prepare_local_environment

    prepare_local_environment()
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
