"""Which REGISTRY credential an image pulls with: scopes of a host and a path prefix, matched
on path-segment boundaries, the most specific winning (pure: no Django)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from credentials.registry_scopes import (
    RegistryScope,
    ScopeError,
    image_repository,
    most_specific,
    parse_scope,
    stored_scope,
)


@pytest.mark.parametrize(("registry", "scope"), [
    ("", "docker.io"), ("docker.io", "docker.io"), ("index.docker.io", "docker.io"),
    ("https://index.docker.io/v1/", "docker.io"), ("https://nvcr.io/v2/", "nvcr.io"),
    ("nvcr.io", "nvcr.io"), ("NVCR.IO", "nvcr.io"), ("nvcr.io/", "nvcr.io"),
    ("nvcr.io/nvidia/team-a", "nvcr.io/nvidia/team-a"),
    ("https://nvcr.io/nvidia/team-a/", "nvcr.io/nvidia/team-a"),
    ("registry.local:5000/x", "registry.local:5000/x"), ("localhost:5000", "localhost:5000"),
    ("docker.io/library", "docker.io/library"), ("ghcr.io/a.b/c__d/e-f", "ghcr.io/a.b/c__d/e-f"),
])
def test_a_registry_names_a_host_and_a_path_prefix(registry, scope):
    assert str(parse_scope(registry)) == scope


@pytest.mark.parametrize("registry", [
    "/nvidia", "nvcr.io//team", "nvcr.io/Team", "nvcr.io/team:1", "nvcr.io/team@sha256:ab",
    "ftp://nvcr.io", "nvcr.io:0", "nvcr.io:99999", "nv cr.io", "-nvcr.io", "nvcr.io/a/../b",
    "nvcr.io/team?x=1", "user@nvcr.io", "nvcr.io/" + "a" * 300, "nvcr.io/-a", "nvcr.io/a-",
])
def test_a_registry_that_names_no_scope_is_refused(registry):
    with pytest.raises(ScopeError):
        parse_scope(registry)


@pytest.mark.parametrize(("image", "repository"), [
    ("ubuntu", "docker.io/library/ubuntu"), ("ubuntu:22.04", "docker.io/library/ubuntu"),
    ("team/tool:1", "docker.io/team/tool"),
    ("docker.io/library/ubuntu", "docker.io/library/ubuntu"),
    ("index.docker.io/team/x", "docker.io/team/x"),
    ("nvcr.io/nvidia/pytorch:24.01-py3", "nvcr.io/nvidia/pytorch"),
    ("ghcr.io/team/tool@sha256:ab", "ghcr.io/team/tool"),
    ("registry.local:5000/x/y:2", "registry.local:5000/x/y"), ("localhost/x", "localhost/x"),
    ("NVCR.IO/x", "nvcr.io/x"),
])
def test_an_image_names_its_host_and_repository(image, repository):
    assert str(image_repository(image)) == repository


CREDENTIALS = [("hub", parse_scope("")), ("nvcr", parse_scope("nvcr.io")),
               ("nvidia", parse_scope("nvcr.io/nvidia")),
               ("team-a", parse_scope("nvcr.io/nvidia/team-a")),
               ("team-a-again", parse_scope("nvcr.io/nvidia/team-a")),
               ("team-b", parse_scope("nvcr.io/nvidia/team-b")),
               ("library", parse_scope("docker.io/library")),
               ("local", parse_scope("registry.local:5000/x"))]


@pytest.mark.parametrize(("image", "names"), [
    ("nvcr.io/nvidia/team-a/trainer:1", ["team-a", "team-a-again"]),
    ("nvcr.io/nvidia/team-b", ["team-b"]),
    ("nvcr.io/nvidia/team-ab/trainer", ["nvidia"]),  # a prefix ends at a '/'
    ("nvcr.io/nvidia/team-a", ["team-a", "team-a-again"]),
    ("nvcr.io/nvidian/x", ["nvcr"]), ("nvcr.io/x", ["nvcr"]),
    ("ubuntu", ["library"]), ("team/tool", ["hub"]),
    ("registry.local:5000/x/y", ["local"]), ("registry.local/x/y", []),  # the port is the host's
    ("registry.local:5001/x", []), ("quay.io/x", []),
])
def test_an_image_pulls_with_its_most_specific_credentials(image, names):
    assert most_specific(CREDENTIALS, image) == names


def test_a_stored_host_that_no_longer_parses_is_still_its_host():
    assert stored_scope("Weird_Host") == RegistryScope("weird_host")
    assert stored_scope("nvcr.io/nvidia") == RegistryScope("nvcr.io", "nvidia")


COMPONENT = st.from_regex(r"[a-z0-9]{1,3}(-[a-z0-9]{1,2})?", fullmatch=True)
PATHS = st.lists(COMPONENT, min_size=0, max_size=4).map("/".join)
HOSTS = st.sampled_from(["nvcr.io", "ghcr.io", "registry.local:5000", "registry.local"])


@given(HOSTS, PATHS, PATHS)
def test_a_scope_covers_exactly_the_repositories_below_it(host, prefix, path):
    scope = parse_scope(f"{host}/{prefix}")
    image = f"{host}/{path or 'x'}"
    repository = image_repository(image).path.split("/")
    parts = prefix.split("/") if prefix else []
    assert scope.covers(image_repository(image)) == (repository[:len(parts)] == parts)


@given(st.lists(st.tuples(HOSTS, PATHS), max_size=6), HOSTS, PATHS)
def test_the_chosen_scope_covers_the_image_and_none_covering_it_is_deeper(scopes, host, path):
    scoped = [(index, parse_scope(f"{h}/{p}")) for index, (h, p) in enumerate(scopes)]
    image = f"{host}/{path or 'x'}:1"
    chosen = most_specific(scoped, image)
    repository = image_repository(image)
    covering = [scope for _, scope in scoped if scope.covers(repository)]
    assert bool(chosen) == bool(covering)
    for index in chosen:
        assert scoped[index][1].covers(repository)
        assert scoped[index][1].depth == max(scope.depth for scope in covering)
    # Ties go whole, in the order given; another host's scope never wins.
    assert chosen == sorted(chosen)
    assert all(scoped[index][1].host == host for index in chosen)
