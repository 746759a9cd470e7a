"""Dashboard routes, mounted at the site root (after /admin/, /api/ and /webhooks/)."""

from django.contrib.auth import views as auth_views
from django.urls import path

from . import views

app_name = "dashboard"
urlpatterns = [
    path("", views.pools, name="pools"),
    path("favicon.ico", views.favicon, name="favicon"),
    path("fragment/pools/", views.pools_fragment, name="pools-fragment"),
    path("login/", views.SignInView.as_view(), name="login"),
    path("login/token/", views.token_login, name="token-login"),
    path("logout/", auth_views.LogoutView.as_view(next_page="/login/"), name="logout"),
    path("pools/<str:name>/", views.pool, name="pool"),
    path("pools/<str:name>/fragment/", views.pool_fragment, name="pool-fragment"),
    path("pools/<str:name>/revisions/<int:revision>/", views.pool_revision,
         name="pool-revision"),
    path("pools/<str:name>/subpools/new/", views.subpool_create, name="subpool-create"),
    path("pools/<str:name>/subpools/<str:subpool>/quota/", views.subpool_quota,
         name="subpool-quota"),
    path("pools/<str:name>/subpools/<str:subpool>/delete/", views.subpool_delete,
         name="subpool-delete"),
    path("workflows/", views.workflows, name="workflows"),
    path("workflows/<str:name>/", views.workflow, name="workflow"),
    path("workflows/<str:name>/cancel/", views.workflow_cancel, name="workflow-cancel"),
    path("cluster/", views.cluster, name="cluster"),
    path("cluster/fragment/", views.cluster_fragment, name="cluster-fragment"),
    path("backends/", views.backends, name="backends"),
]
