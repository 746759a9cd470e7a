"""`/api/credentials`: set, list, delete in OSMO's shapes; values sealed at rest and never in an
answer; bad input is a 400 that changes nothing; each user sees only their own."""

from __future__ import annotations

import json

import pytest
from cryptography.fernet import Fernet
from django.db import connection
from django.test import override_settings

from credentials import crypto, services
from credentials.models import Credential
from tests.conftest import make_client

pytestmark = pytest.mark.django_db
SECRET = "s3cr3t-Value-9f2c71"


@pytest.fixture
def alice(db):
    return make_client("alice", "osmo-team-user")


@pytest.fixture
def bob(db):
    return make_client("bob", "osmo-team-user")


def set_cred(client, name, body):
    return client.post(f"/api/credentials/{name}", body, format="json")


def stored():
    return sorted(Credential.objects.values_list("user__username", "name", "cred_type",
                                                 "profile", "keys", "sealed"))


def test_generic_set_list_delete(alice):
    response = set_cred(alice, "omni", {"generic_credential": {"credential": {
        "omni_user": "me", "omni_pass": SECRET}}})
    assert response.status_code == 200, response.json()
    assert response.json() == {"cred_name": "omni", "cred_type": "GENERIC", "profile": None,
                               "keys": ["omni_user", "omni_pass"]}
    listed = alice.get("/api/credentials")
    assert listed.json() == {"credentials": [{"cred_name": "omni", "cred_type": "GENERIC",
                                              "profile": None,
                                              "keys": ["omni_user", "omni_pass"]}]}
    deleted = alice.delete("/api/credentials/omni")
    assert deleted.status_code == 200
    assert deleted.json()["credentials"][0]["cred_name"] == "omni"
    assert Credential.objects.count() == 0
    assert alice.delete("/api/credentials/omni").status_code == 404


def test_registry_and_data_profiles(alice):
    assert set_cred(alice, "ngc", {"registry_credential": {
        "registry": "https://nvcr.io/v2/", "username": "$oauthtoken", "auth": SECRET}}
    ).json() == {"cred_name": "ngc", "cred_type": "REGISTRY", "profile": "nvcr.io",
                 "keys": ["registry", "username", "auth"]}
    assert set_cred(alice, "bucket", {"data_credential": {
        "endpoint": "s3://bucket", "access_key_id": "AKIA", "access_key": SECRET}}
    ).json()["profile"] == "s3://bucket"
    assert [c["cred_type"] for c in alice.get("/api/credentials").json()["credentials"]] == [
        "REGISTRY", "DATA"]


def test_registry_credentials_of_one_host_scoped_to_different_paths(alice):
    for name, registry in (("team-a", "nvcr.io/nvidia/team-a"),
                           ("team-b", "https://nvcr.io/nvidia/team-b/"), ("ngc", "NVCR.IO")):
        response = set_cred(alice, name, {"registry_credential": {
            "registry": registry, "username": "$oauthtoken", "auth": SECRET}})
        assert response.status_code == 200, response.json()
    assert [(c["cred_name"], c["profile"])
            for c in alice.get("/api/credentials").json()["credentials"]] == [
        ("ngc", "nvcr.io"), ("team-a", "nvcr.io/nvidia/team-a"),
        ("team-b", "nvcr.io/nvidia/team-b")]


@pytest.mark.parametrize("registry", ["nvcr.io/Team-A", "nvcr.io//team", "/team",
                                      "nvcr.io/team:1", "ftp://nvcr.io", "nvcr.io:70000"])
def test_a_registry_scope_that_does_not_parse_is_a_400_that_changes_nothing(alice, registry):
    set_cred(alice, "team-a", {"registry_credential": {"registry": "nvcr.io/team-a",
                                                       "auth": "kept"}})
    before = stored()
    response = set_cred(alice, "team-a", {"registry_credential": {"registry": registry,
                                                                  "auth": SECRET}})
    assert response.status_code == 400, response.json()
    body = response.json()
    assert (body["code"], list(body["errors"])) == ("invalid_request",
                                                    ["registry_credential.registry"])
    assert body["detail"].startswith("The REGISTRY credential is not valid: "
                                     "registry_credential.registry: ")
    assert SECRET not in response.content.decode()
    assert stored() == before


def test_a_second_set_replaces_the_first(alice):
    set_cred(alice, "c1", {"generic_credential": {"credential": {"a": "1"}}})
    set_cred(alice, "c1", {"generic_credential": {"credential": {"b": SECRET}}})
    row = Credential.objects.get()
    assert (row.keys, crypto.open_sealed(row.sealed)) == (["b"], {"b": SECRET})


def test_sealed_at_rest(alice):
    set_cred(alice, "c1", {"generic_credential": {"credential": {"token": SECRET}}})
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {Credential._meta.db_table}")
        rows = cursor.fetchall()
    assert len(rows) == 1 and SECRET not in repr(rows)


def test_each_user_sees_and_deletes_only_their_own(alice, bob):
    set_cred(alice, "shared-name", {"generic_credential": {"credential": {"k": SECRET}}})
    before = stored()
    assert bob.get("/api/credentials").json() == {"credentials": []}
    assert bob.delete("/api/credentials/shared-name").status_code == 404
    assert stored() == before
    # Bob's own credential of the same name is his, beside Alice's.
    set_cred(bob, "shared-name", {"generic_credential": {"credential": {"other": "x"}}})
    assert [c["keys"] for c in alice.get("/api/credentials").json()["credentials"]] == [["k"]]


@pytest.mark.parametrize("name, body, field", [
    ("c1", {"ssh_credential": {"credential": {"k": SECRET}}}, "ssh_credential"),
    ("c1", {}, "body"),
    ("c1", {"generic_credential": {"credential": {"k": SECRET}},
            "registry_credential": {"auth": SECRET}}, "body"),
    ("c1", {"registry_credential": {"username": "me"}}, "registry_credential.auth"),
    ("c1", {"registry_credential": {"auth": SECRET, "token": SECRET}},
     "registry_credential.token"),
    ("c1", {"data_credential": {"endpoint": "s3://b"}}, "data_credential.access_key_id"),
    ("c1", {"generic_credential": {"credential": {"bad key!": SECRET}}}, "generic_credential"),
    ("c1", {"generic_credential": {"credential": {"k": 7}}}, "generic_credential.k"),
    ("c1", {"generic_credential": {"credential": {"k": "x" * 70000}}}, "generic_credential.k"),
    ("c1", {"generic_credential": {"credential": {f"k{i}": "v" for i in range(65)}}},
     "generic_credential"),
    ("1-starts-with-digit", {"generic_credential": {"credential": {"k": SECRET}}}, "name"),
])
def test_bad_input_is_a_400_that_changes_nothing(alice, name, body, field):
    set_cred(alice, "kept", {"generic_credential": {"credential": {"k": "v"}}})
    before = stored()
    response = set_cred(alice, name, body)
    assert response.status_code == 400, response.json()
    assert field in response.json()["errors"], response.json()
    assert response.json()["code"] in ("invalid_request", "invalid_name")
    assert SECRET not in response.content.decode()
    assert stored() == before


def test_an_oversized_body_is_refused_before_anything(alice):
    huge = {"generic_credential": {"credential": {"k": "x" * (20 * 1024 * 1024)}}}
    response = alice.post("/api/credentials/c1", json.dumps(huge),
                          content_type="application/json")
    assert response.status_code in (400, 413)
    assert Credential.objects.count() == 0


def test_rotation_new_key_first_old_keys_after(alice):
    old = crypto.new_key()
    with override_settings(OSMO_CREDENTIAL_KEYS=[old]):
        set_cred(alice, "c1", {"generic_credential": {"credential": {"k": SECRET}}})
        sealed_old = Credential.objects.get().sealed
    new = crypto.new_key()
    with override_settings(OSMO_CREDENTIAL_KEYS=[new, old]):
        assert crypto.open_sealed(sealed_old) == {"k": SECRET}  # still opens
        assert services.credentials_rotate() == 1
        sealed_new = Credential.objects.get().sealed
    Fernet(new.encode()).decrypt(sealed_new.encode())  # sealed under the new key now
    with override_settings(OSMO_CREDENTIAL_KEYS=[new]):  # the old key dropped
        assert crypto.open_sealed(sealed_new) == {"k": SECRET}
    with override_settings(OSMO_CREDENTIAL_KEYS=[old]):
        with pytest.raises(Exception) as error:
            crypto.open_sealed(sealed_new)
        assert SECRET not in str(error.value)


def test_no_key_is_a_503_and_nothing_stored(alice):
    with override_settings(OSMO_CREDENTIAL_KEYS=[]):
        response = set_cred(alice, "c1", {"generic_credential": {"credential": {"k": SECRET}}})
    assert response.status_code == 503
    assert response.json()["code"] == "credentials_unavailable"
    assert Credential.objects.count() == 0


def test_the_standalone_keeps_one_key_in_its_data_folder(tmp_path, monkeypatch):
    from osmo import embedded

    monkeypatch.setenv("OSMO_DATA_DIR", str(tmp_path))
    key = embedded.local_credential_key()
    assert embedded.local_credential_key() == key  # the same at every start
    path = tmp_path / "credential_key"
    assert path.stat().st_mode & 0o777 == 0o600
    Fernet(key.encode())  # a valid Fernet key
