"""Which registry host an image pulls from, as the container runtime reads the reference, and
so which REGISTRY credentials (by their host) a pod pulls with."""

from __future__ import annotations

import pytest

from credentials.payloads import image_host
from credentials.registry_scopes import parse_scope


@pytest.mark.parametrize(("image", "host"), [
    ("ubuntu", "docker.io"), ("ubuntu:22.04", "docker.io"), ("team/tool:1", "docker.io"),
    ("docker.io/library/ubuntu", "docker.io"), ("index.docker.io/team/x", "docker.io"),
    ("nvcr.io/nvidia/pytorch:24.01-py3", "nvcr.io"), ("ghcr.io/team/tool@sha256:ab", "ghcr.io"),
    ("registry.local:5000/x/y", "registry.local:5000"), ("localhost/x", "localhost"),
    ("localhost:5000/x", "localhost:5000"), ("NVCR.IO/x", "nvcr.io"), ("", "docker.io"),
])
def test_an_image_names_its_registry_host(image, host):
    assert image_host(image) == host


@pytest.mark.parametrize(("registry", "host"), [
    ("https://ghcr.io/v2/", "ghcr.io"), ("", "docker.io"), ("nvcr.io", "nvcr.io"),
    ("registry-1.docker.io", "docker.io"), ("registry.local:5000", "registry.local:5000"),
])
def test_a_credential_s_registry_is_matched_by_its_host(registry, host):
    assert str(parse_scope(registry)) == host
