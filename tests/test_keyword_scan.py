"""The one keyword scan (mailfilter/text.py): every automaton it may use finds the same
words at the same places, and a process that analyses one message (the pipe filter)
builds only the small one (the DFA cost 3.6 ms of its start and 1.8 MB; two of them
6 ms and 3.5 MB of every daemon's memory)."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

import mailfilter.engine  # noqa: F401 - every step registers its words
import mailfilter.text as text_module
from mailfilter.text import Prepared

WORDS = sorted(text_module._WORDS)


def _hits_with(text: str, scans_before: int) -> dict[str, list[int]]:
    """The scan's hits when ``scans_before`` ASCII texts were scanned before this one."""
    saved = text_module._ASCII_SCANS[0]
    text_module._ASCII_SCANS[0] = scans_before
    try:
        return Prepared(text)._hits
    finally:
        text_module._ASCII_SCANS[0] = saved


@given(st.lists(st.one_of(st.sampled_from(WORDS), st.sampled_from(["\n", " ", "x", "-"]),
                          st.text(max_size=6)), max_size=40),
       st.booleans())
def test_the_small_automaton_and_the_dfa_find_the_same_words(pieces: list[str],
                                                             upper: bool) -> None:
    text = "".join(pieces)
    text = text.upper() if upper else text
    small = _hits_with(text, 0)
    fast = _hits_with(text, text_module.DFA_AFTER_SCANS + 1)
    assert small == fast
    lowered = text.lower()
    for word, starts in small.items():
        assert starts == sorted(starts)
        assert all(lowered.startswith(word, start) for start in starts)


def test_a_registered_word_is_found_by_each_kind() -> None:
    for text in ("See below. -----Original Message----- From: a", "Ünsubscribe é unsubscribe"):
        for scans in (0, text_module.DFA_AFTER_SCANS + 1):
            hits = _hits_with(text, scans)
            assert hits, (text, scans)
    assert "unsubscribe" in _hits_with("Ünsubscribe é unsubscribe", 0)


PROBE = """
import sys
from mailfilter.config import FingerprintSettings
from mailfilter.engine import analyse
import mailfilter.text as t
message = (b"From: ann@example.org\\nSubject: Re: lunch\\n\\nSee you at noon.\\n\\n"
           b"On Monday Bob wrote:\\n> lunch?\\n-- \\nAnn\\n")
for number in range(int(sys.argv[1])):
    analyse(message.replace(b"noon", b"noon %d" % number), FingerprintSettings())
print(" ".join(sorted(t._AUTOMATA)))
"""


def _kinds_after(messages: int) -> str:
    done = subprocess.run([sys.executable, "-c", PROBE, str(messages)], capture_output=True,
                          text=True, timeout=120, check=True)
    return done.stdout.strip()


def test_one_message_builds_only_the_small_automaton_and_many_the_dfa() -> None:
    assert _kinds_after(1) == "bytes"
    assert _kinds_after(200) == "bytes dfa"           # the small one dropped
