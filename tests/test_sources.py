"""mailfilter.sources: an mbox split where mutt splits it, in time linear in the file."""

from __future__ import annotations

import re

from helpers import best_cpu_seconds
from hypothesis import example, given, settings
from hypothesis import strategies as st

from mailfilter.sources import _MBOX_SEPARATOR, _split_mbox

_TIME = re.compile(rb"\d\d:\d\d")
_YEAR = re.compile(rb"\d{4}")


def _separators(data: bytes) -> list[int]:
    """Where messages start, read line by line: a "From " line at the top or after a blank
    line, holding a time and, after it, four digits, and ending in a line break (a line
    that starts a message cannot also be the blank line before the next one)."""
    starts, at, blank, separated = [], 0, False, False
    while at < len(data):
        end = data.find(b"\n", at)
        line = data[at:] if end < 0 else data[at:end]
        clock = _TIME.search(line)
        if (blank or at == 0) and line.startswith(b"From ") and end >= 0 and clock \
                and _YEAR.search(line, clock.start() + 5):
            starts.append(at)
            blank, separated = False, True
        else:
            # A blank line after a line break, but not the one ending a separator: that
            # one is taken by the separator's line, and cannot make another's blank line.
            blank = line == b"" and at > 0 and not separated
            separated = False
        if end < 0:
            break
        at = end + 1
    return starts


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from([
    b"From ", b"From a@b Mon Jan  1 00:00:00 2024", b"12:34", b":56", b" ", b"2024",
    b"123", b"\n", b"\n\n", b"x", b"From here on", b"Subject: s"]), max_size=14).map(b"".join))
@example(b"From a@b Mon Jan  1 00:00:00 2024\n\nFrom a@b Mon Jan  1 00:00:00 2024\n")
@example(b"From a@b Mon Jan  1 00:00:00 2024\n\n\nFrom a@b Mon Jan  1 00:00:00 2024\n")
@example(b"\nFrom a@b Mon Jan  1 00:00:00 2024\n")
def test_messages_start_at_from_lines_with_a_time_then_a_year(data: bytes) -> None:
    assert [match.start(1) for match in _MBOX_SEPARATOR.finditer(data)] == _separators(data)


def test_a_crafted_from_line_costs_linear_time() -> None:
    """A "From " line of times but no year (each time tried with every place after it:
    20 s for 128 KB), or of times and years without a final line break (each pair tried:
    the cube of its length), now costs at most twice as much a KB at 1 MiB as at 16 KiB."""
    top = b"From a@b Mon Jan  1 00:00:00 2024\nSubject: s\n\nx\n\nFrom "
    for unit, end in ((b"12:34 ", b"\n"), (b"12:34:56 2024", b"")):
        costs = []
        for size in (16 * 1024, 1024 * 1024):
            data = top + unit * (size // len(unit)) + end
            messages = list(_split_mbox("crafted", data))
            assert len(messages) == 1 + (end == b"\n" and unit.endswith(b"2024"))
            costs.append(best_cpu_seconds(lambda data=data: list(_split_mbox("crafted", data)))
                         / (len(data) / 1024))
        assert costs[1] <= 2 * max(costs[0], 2e-6), (unit, costs)
