"""Routes under /api/ for login tokens and profiles."""

from django.urls import path

from . import api, osmo_api

urlpatterns = [
    path("auth/jwt/access_token", api.AccessTokenExchangeView.as_view(),
         name="auth-access-token"),
    path("auth/access_token", api.AccessTokenListView.as_view(), name="access-tokens"),
    path("auth/access_token/<int:token_id>", osmo_api.TokenByIdView.as_view(),
         name="access-token"),
    # NVIDIA's client: tokens by name, users (docs/API-OSMO-CLIENT.md)
    path("auth/access_token/<str:name>", osmo_api.NamedTokenView.as_view(),
         name="access-token-named"),
    path("auth/access_token/<str:name>/roles", osmo_api.TokenRolesView.as_view(),
         name="access-token-roles"),
    path("auth/user", osmo_api.UserListView.as_view(), name="users"),
    path("auth/user/<str:user_id>", osmo_api.UserDetailView.as_view(), name="user"),
    path("auth/user/<str:user_id>/access_token", osmo_api.UserTokenListView.as_view(),
         name="user-access-tokens"),
    path("auth/user/<str:user_id>/access_token/<str:name>",
         osmo_api.UserNamedTokenView.as_view(),
         name="user-access-token-named"),
]
