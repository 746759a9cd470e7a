"""A workflow's dashboard link is built around one reverse() per script prefix, and is the
link reverse() gives for every name, under any script prefix."""

from __future__ import annotations

from django.urls import get_script_prefix, reverse, set_script_prefix
from hypothesis import given, settings
from hypothesis import strategies as st

from workflows.api.serializers import overview_url

NAMES = st.one_of(st.from_regex(r"[a-z0-9][a-z0-9.~_-]{0,40}", fullmatch=True),
                  st.text(min_size=1, max_size=20).filter(lambda t: "/" not in t))


@settings(max_examples=300, deadline=None)
@given(name=NAMES, prefix=st.sampled_from(["/", "/osmo/", "/a b/"]))
def test_the_link_is_reverses(name: str, prefix: str) -> None:
    before = get_script_prefix()
    set_script_prefix(prefix)
    try:
        assert overview_url(name) == reverse("dashboard:workflow", args=[name])
    finally:
        set_script_prefix(before)


def test_a_plain_name_is_spliced_in() -> None:
    assert overview_url("train-7") == reverse("dashboard:workflow", args=["train-7"])
    assert overview_url("train-7").endswith("/train-7/")
