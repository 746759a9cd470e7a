"""Service settings routes; included under `api/` (next to `pools.api.urls`)."""

from django.urls import path

from . import service_views

urlpatterns = [
    path("configs/service", service_views.ServiceConfigView.as_view(), name="service-config"),
]
