from django.urls import path

from . import profile_views, views

urlpatterns = [
    path("configs/pool", views.PoolListView.as_view(), name="pool-list"),
    path("configs/pool/<str:name>", views.PoolDetailView.as_view(), name="pool-detail"),
    path("configs/pool/<str:name>/history", views.PoolHistoryView.as_view(),
         name="pool-history"),
    path("configs/pool/<str:parent>/subpool", views.SubpoolListView.as_view(),
         name="subpool-list"),
    path("configs/pool/<str:parent>/subpool/<str:subpool>", views.SubpoolDetailView.as_view(),
         name="subpool-detail"),
    path("pool_quota", views.PoolQuotaView.as_view(), name="pool-quota"),
    # The OSMO client's pool listing without quota: the same report.
    path("pool", views.PoolConfigView.as_view(), name="pool-usage"),
    path("profile/settings", profile_views.ProfileSettingsView.as_view(),
         name="profile-settings"),
]
