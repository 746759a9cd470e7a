"""The project's URLs plus the webhook at the root, as the lead will include it."""

from django.urls import include, path

from osmo.urls import handler404, handler500  # noqa: F401
from osmo.urls import urlpatterns as project_urls

urlpatterns = [
    *project_urls,
    path("webhooks/", include("scheduler.api.webhook_urls")),
]
