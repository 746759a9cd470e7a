from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from pools.api.profile_views import WhoAmIView

from .health import HealthView, VersionView
from .observability.views import metrics_view

handler404 = "osmo.errors.json_not_found"
handler500 = "osmo.errors.json_server_error"

api = [
    path("health", HealthView.as_view(), name="health"),
    path("whoami", WhoAmIView.as_view(), name="whoami"),
    path("version", VersionView.as_view(), name="version"),
    path("schema", SpectacularAPIView.as_view(), name="schema"),
    path("docs", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    # The workflow routes first: a submission is the busiest request, and every include tried
    # before the one that matches costs a failed match of each of its routes. No route of
    # another include matches a path of these (tests/test_url_order.py).
    path("", include("workflows.api.urls")),
    path("", include("osmo.accounts.urls")),
    path("", include("pools.api.urls")),
    path("", include("pools.api.service_urls")),
    path("", include("scheduler.api.urls")),
    path("", include("credentials.api.urls")),
    path("", include("workflow_apps.api.urls")),
]

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", include(api)),
    path("webhooks/", include("scheduler.api.webhook_urls")),
    path("metrics", metrics_view, name="metrics"),
    path("", include("dashboard.urls")),
]
