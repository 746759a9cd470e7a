"""What is kept by text: the least recently used goes first, within a count and a number of
characters; a text over the longest is never kept."""

from __future__ import annotations

from osmo.text_keyed import TextKeyed


def test_the_least_recently_used_goes_first_within_both_bounds() -> None:
    kept = TextKeyed(entries=3, characters=10, longest=6)
    for text in ("aa", "bb", "cc"):
        kept.put((text, 1), text.upper())
    assert kept.get(("aa", 1)) == "AA"  # used: now the most recent
    kept.put(("dd", 1), "DD")  # a fourth: "bb" goes
    assert kept.texts() == ["cc", "aa", "dd"] and kept.held() == 6
    kept.put(("eeeee", 1), "EEEEE")  # 11 characters: "cc" goes, then 9
    assert kept.texts() == ["aa", "dd", "eeeee"] and kept.held() == 9
    assert kept.get(("bb", 1)) is None and kept.get(("aa", 2)) is None  # the whole key counts


def test_a_long_text_and_a_repeated_key_are_counted_right() -> None:
    kept = TextKeyed(entries=3, characters=10, longest=6)
    kept.put(("toolong", 1), "x")
    assert kept.texts() == [] and kept.held() == 0 and not kept.keeps("toolong")
    kept.put(("ab", 1), "first")
    kept.put(("ab", 1), "second")  # replaced, not counted twice
    assert kept.get(("ab", 1)) == "second" and kept.held() == 2
    kept.clear()
    assert kept.texts() == [] and kept.held() == 0
