"""The Django project. Importing the package loads no framework, so pure modules here
(`osmo.bounded`) serve pure packages (`workflows.spec`). The Celery app (`osmo.celery`) is loaded
with the app registry (`osmo.accounts.apps`) in every Django process, and by `celery -A osmo`."""
