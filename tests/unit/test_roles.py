from osmo.accounts.roles import Roles, parse_pool_group


def test_parse_pool_group():
    assert parse_pool_group("osmo-team-admin") == ("team", "admin")
    assert parse_pool_group("osmo-team*-user") == ("team*", "user")
    assert parse_pool_group("osmo-my-team-user") == ("my-team", "user")
    assert parse_pool_group("osmo-admin") is None
    assert parse_pool_group("osmo-backend") is None
    assert parse_pool_group("osmo-team--a-user") is None  # no subpool-specific roles
    assert parse_pool_group("team-admin") is None


def test_pool_role_precedence_and_patterns():
    roles = Roles("u", False, False, admin_patterns=("ml*",), user_patterns=("team", "ml-x"))
    assert roles.pool_role("ml-x") == "admin"
    assert roles.pool_role("team") == "user"
    assert roles.pool_role("team2") is None
    assert roles.can_admin("ml") and not roles.can_admin("team")
    assert Roles("a", True, False, (), ()).pool_role("anything") == "admin"
