"""mailfilter.normalise on crafted values: the same answers as a search from every place,
in time linear in the value (a header value is capped at 8,192 characters, but a
forwarded message's ``From:`` line in a body is not)."""

from __future__ import annotations

import re
from collections.abc import Callable

from helpers import best_cpu_seconds
from hypothesis import given, settings
from hypothesis import strategies as st

from mailfilter.message import parse
from mailfilter.normalise import address_of, is_forward_subject, is_reply_subject, normal_subject

# The address pattern as it was, tried from every place: the oracle for the first match.
_EVERY_PLACE = re.compile(r"<([^<>\s]+@[^<>\s]+)>|([^\s<>\"(),;:]+@[^\s<>\"(),;:]+)")


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet='aB@<> ,;:"()\t.-é', max_size=40)
       | st.lists(st.sampled_from(["ann@x.org", "<b@y>", "@", "a", " ", "<", ">", ","]),
                  max_size=12).map("".join))
def test_an_address_is_the_first_one_a_search_from_every_place_finds(value: str) -> None:
    found = _EVERY_PLACE.search(value)
    expected = (found.group(1) or found.group(2)).lower() if found and "@" in value \
        else value.strip().lower() or None
    assert address_of(value) == expected


def _cpu_per_kb(work: Callable[[str], object], value: str) -> float:
    return best_cpu_seconds(lambda: work(value)) / (len(value) / 1024)


def test_crafted_values_cost_linear_time() -> None:
    """A run of address characters after an "@" was taken to its end again from each of
    its places (27 s for 128 KB), and "re" with spaces but no colon backtracked over the
    spaces from each of them (14 s for 128 KB): each now costs at most twice as much a KB
    at 512 KB as at 16 KB."""
    cases = {
        "address after @": (address_of, lambda n: "@" + "a" * n),
        "address before @": (address_of, lambda n: "a" * n + "@"),
        "reply prefix and spaces": (is_reply_subject, lambda n: "re" + " " * n + "x"),
        "forward prefix and spaces": (is_forward_subject, lambda n: "fwd" + " " * n + "x"),
        "subject of prefixes and spaces": (normal_subject, lambda n: "Re" + " " * n + "x"),
    }
    for name, (work, value) in cases.items():
        small = _cpu_per_kb(work, value(16 * 1024))
        large = _cpu_per_kb(work, value(512 * 1024))
        assert large <= 2 * max(small, 2e-6), (name, small, large)


def test_a_forwarded_from_line_of_one_long_run_is_read_in_linear_time() -> None:
    """The reply layout reads a forwarded message's From: line with address_of: in a body,
    where no header cap applies (a 127 KB message held a daemon's session for 27 s)."""
    def message(n: int) -> bytes:
        return (b"From: ann@example.org\nSubject: Fwd: r\n\nSee below.\n\n"
                b"---------- Forwarded message ---------\nFrom: @" + b"a" * n +
                b"\nSubject: r\nTo: b@example.org\n\nHello Bob, the figures.\n")
    small = best_cpu_seconds(lambda: parse(message(16 * 1024))) / 16
    large = best_cpu_seconds(lambda: parse(message(512 * 1024))) / 512
    assert large <= 2 * max(small, 2e-6), (small, large)
