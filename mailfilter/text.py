"""One prepared text: its lower-case copy and one keyword scan that every cleaning step reads.

The cleaning steps (reply and forward layouts, sign-offs, disclaimers, links) each need to
know whether a text holds some words ("wrote", "original message", "confidential", "://")
before they run their patterns, and where.  Asking each word with ``in`` cost 47 substring
scans a segment in quotes.py alone; here all the words every step registers are found in
one pass of an Aho-Corasick automaton (``ahocorasick_rs``, a DFA in Rust: about 4 ns a
character) over one lower-case copy, and each step reads the hits: whether a word occurs,
and at which offsets.  The tokens the fingerprint and the identifiers read are made here
once too.  Pure, no I/O; a :class:`Prepared` is never changed after it is made.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

# Every word some step asks about, in the order registered (see register()).
_WORDS: dict[str, int] = {}
# The automata over _WORDS, by kind ("str", "bytes", "bytes dfa"), with the words each was
# built on; and how many ASCII texts were scanned (see _automaton).
_AUTOMATA: dict[str, tuple[Any, list[str]]] = {}
_ASCII_SCANS = [0]

# ASCII letters and digits map to themselves in lower case, every other byte to a space:
# on ASCII text, ``translate`` + ``split`` finds exactly the tokens of TOKEN_PATTERN.
ASCII_WORDS = bytes(
    (byte | 0x20) if chr(byte).isascii() and chr(byte).isalpha() else
    byte if chr(byte).isdigit() and byte < 128 else 0x20
    for byte in range(256))
TOKEN_PATTERN = r"[^\W_]+"
_TOKEN: list = []              # the compiled TOKEN_PATTERN, made on first use


def register(words: Iterable[str]) -> frozenset[str]:
    """Add lower-case ``words`` to the one scan; returns them, for :meth:`Prepared.any`.

    Modules call it when they are imported; the automaton is built (again) on the first
    scan after a new word."""
    found = frozenset(words)
    for word in sorted(found):
        if word != word.lower() or not word:
            raise ValueError(f"keywords are lower case and not empty: {word!r}")
        _WORDS.setdefault(word, len(_WORDS))
    return found


_SCAN_WINDOW = 1 << 18      # characters the keyword scan reads at once (Prepared._hits)
_SEARCH_SHARE = 16          # a piece searched for in its text is 1/16 of it or more (Prepared.of)


def _windowed(find: Callable[..., list[tuple[int, int, int]]], lowered: str,
              ascii_text: bool, reach: int) -> Iterator[tuple[int, int, int]]:
    """``find``'s overlapping matches in a long ``lowered``, a window at a time, each
    window reaching ``reach`` characters (a word's length but one) past its end, a word
    counted in the window it starts in: in one call the matches come as a list of tuples,
    ~170 bytes each, 100 MB for a crafted 4 MiB of keywords."""
    for begin in range(0, len(lowered), _SCAN_WINDOW):
        window = lowered[begin:begin + _SCAN_WINDOW + reach]
        for index, start, end in find(window.encode("ascii") if ascii_text else window,
                                      overlapping=True):
            if start < _SCAN_WINDOW:
                yield index, begin + start, begin + end


# ASCII texts scanned with the small automaton before the DFA is built for the next ones.
DFA_AFTER_SCANS = 64


def _automaton(ascii_text: bool) -> tuple[Any, list[str]]:
    """(the automaton over the registered words for a text of this kind, those words in
    its order), built on first use.  An ASCII text — most mail — is scanned as bytes,
    where offsets are those of its characters (1.4 times as fast as a str, whose matches
    the automaton must turn from byte into character offsets).  A process's first
    ``DFA_AFTER_SCANS`` ASCII texts, and every other text, are scanned by a contiguous NFA
    (0.6 ms to build, 0.4 MB); later ASCII texts by a DFA, 2.5 times as fast a text but
    3.6 ms to build and 1.8 MB, which pays only in a process that scans many (a daemon,
    a scan), not in the pipe filter's one message.  Every kind finds the same matches."""
    if ascii_text:
        _ASCII_SCANS[0] += 1
        kind = "bytes dfa" if _ASCII_SCANS[0] > DFA_AFTER_SCANS else "bytes"
    else:
        kind = "str"
    built = _AUTOMATA.get(kind)
    if built is None or len(built[1]) != len(_WORDS):
        import ahocorasick_rs

        words = list(_WORDS)
        kinds = ahocorasick_rs.Implementation
        if kind == "str":
            automaton = ahocorasick_rs.AhoCorasick(words, implementation=kinds.ContiguousNFA)
        else:
            automaton = ahocorasick_rs.BytesAhoCorasick(
                [word.encode("utf-8") for word in words],
                implementation=kinds.DFA if kind == "bytes dfa" else kinds.ContiguousNFA)
        built = _AUTOMATA[kind] = (automaton, words)
        if kind == "bytes dfa":
            _AUTOMATA.pop("bytes", None)        # (its memory back: no longer used)
    return built


def token_pattern():  # noqa: ANN201 - re.Pattern[str]
    """The compiled ``[^\\W_]+`` (maximal runs of Unicode letters and digits)."""
    if not _TOKEN:
        import re
        _TOKEN.append(re.compile(TOKEN_PATTERN))
    return _TOKEN[0]


def encoded(words: Sequence[str]) -> list[bytes]:
    """The UTF-8 bytes of each of ``words`` (tokens, identifiers), in one C loop; a lone
    surrogate, which no token holds, is kept as ``surrogatepass`` writes it."""
    try:
        return list(map(str.encode, words))
    except UnicodeEncodeError:
        return [word.encode("utf-8", "surrogatepass") for word in words]


def words_of(text: str, stoplist: frozenset[str] = frozenset(),
             lowered: str | None = None) -> list[str] | list[bytes]:
    """The tokens of ``text`` (lower case, stop words removed): as ASCII bytes, found by a
    byte translation, when only ASCII letters and digits make its words (most mail, also
    most with a no-break space or typographic quotes: three times as fast as the
    pattern); else as str, by the pattern.  ``lowered``: ``text.lower()``, when the caller
    has it."""
    if text.isascii():
        words = text.encode("ascii").translate(ASCII_WORDS).split()
    else:
        if lowered is None:
            lowered = text.lower()
        if _NON_ASCII_WORD.search(lowered) is not None:
            tokens = token_pattern().findall(lowered)
            return [token for token in tokens if token not in stoplist] if stoplist \
                else tokens
        # Every non-ASCII character separates words: "?" (a separator) stands for each.
        words = lowered.encode("ascii", "replace").translate(ASCII_WORDS).split()
    if stoplist:
        stop = {word.encode("ascii") for word in stoplist if word.isascii()}
        words = [word for word in words if word not in stop]
    return words


class Prepared:
    """A text, its lower-case copy, where each registered keyword occurs in that copy, and
    (on demand) its tokens.

    ``aligned`` says that lowering kept every offset (each character lowered to one), so
    that an offset in ``lowered`` is one in ``text``: then steps run their patterns
    case-sensitively over ``lowered`` (Python's ``re`` is many times slower with
    IGNORECASE on long texts) and only where their words are.
    """

    __slots__ = ("text", "_lowered", "aligned", "_found", "_words")

    def __init__(self, text: str, *, _lowered: str | None = None,
                 _hits: dict[str, list[int]] | None = None) -> None:
        self.text = text
        if _lowered is None and text.isascii():
            self.aligned = True         # lowered in place, on first use
        else:
            if _lowered is None:
                _lowered = text.lower()
            self.aligned = len(_lowered) == len(text)
        self._lowered = _lowered
        self._found = _hits         # None: not scanned yet (a text only tokenised never is)
        self._words: dict[frozenset[str], list[str] | list[bytes]] = {}

    @property
    def lowered(self) -> str:
        """``text.lower()`` (made on first use)."""
        lowered = self._lowered
        if lowered is None:
            lowered = self._lowered = self.text.lower()
        return lowered

    @property
    def _hits(self) -> dict[str, list[int]]:
        """Registered word → its offsets in ``lowered`` (the one scan, on first use)."""
        hits = self._found
        if hits is None:
            hits = {}
            lowered = self.lowered
            if lowered:
                ascii_text = lowered.isascii()
                automaton, words = _automaton(ascii_text)
                find = automaton.find_matches_as_indexes
                matches = find(lowered.encode("ascii") if ascii_text else lowered,
                               overlapping=True) if len(lowered) <= _SCAN_WINDOW \
                    else _windowed(find, lowered, ascii_text, max(map(len, words)) - 1)
                for index, start, _end in matches:
                    hits.setdefault(words[index], []).append(start)
            self._found = hits
        return hits

    def has(self, word: str) -> bool:
        """``word`` (registered) occurs in the lower-case copy."""
        return word in self._hits

    def any(self, words: Iterable[str]) -> bool:
        """One of ``words`` (registered) occurs."""
        hits = self._found
        if hits is None:
            hits = self._hits
        if isinstance(words, (set, frozenset)):
            return not words.isdisjoint(hits)       # one C loop over the few words found
        return any(word in hits for word in words)

    def maybe_any(self, words: frozenset[str]) -> bool:
        """:meth:`any`, or True when the text was not scanned yet: a gate that never
        costs a scan of its own (a step that would scan only for it runs instead)."""
        return self._found is None or not words.isdisjoint(self._found)

    def present(self, words: Iterable[str]) -> list[str]:
        """Those of ``words`` that occur, in the order given."""
        hits = self._hits
        return [word for word in words if word in hits]

    def starts(self, words: Iterable[str], begin: int = 0) -> list[int]:
        """Offsets (in ``lowered``, ascending, each once) where one of ``words`` starts,
        from ``begin`` on."""
        hits = self._hits
        found: set[int] = set()
        if isinstance(words, (set, frozenset)):
            words = [word for word in hits if word in words]    # the few words found
        for word in words:
            offsets = hits.get(word)
            if offsets:
                found.update(offsets[bisect_left(offsets, begin):] if begin else offsets)
        return sorted(found)

    def prefix(self, end: int) -> Prepared:
        """The prepared text of ``text[:end]`` (its hits are those that end by then)."""
        if end >= len(self.text):
            return self
        if not self.aligned:
            return Prepared(self.text[:end])
        return self._part(self.text[:end], 0)

    def of(self, part: str, at: int | None = None) -> Prepared:
        """The prepared text of ``part``, a piece of this text (a reply's own text, a
        forwarded message): its hits read from this one's when it is found here, not
        scanned again.  ``at``: where it starts, when the caller knows.  Otherwise it is
        searched for only when it is at least ``1 / _SEARCH_SHARE`` of this text: a
        message cut into thousands of pieces searched each from the start was quadratic
        (a piece not found here is scanned on its own, as are small ones; its hits are
        the same either way).  (Beyond ASCII, only when the piece lowers to the same as
        that piece of the lowered text: Greek final sigma lowers by its context.)"""
        if part is self.text:
            return self
        if self._found is None or not self.aligned:
            return Prepared(part)
        if at is None:
            if len(part) * _SEARCH_SHARE < len(self.text):
                return Prepared(part)
            at = self.text.find(part)
            if at < 0:
                return Prepared(part)
        if not part.isascii():
            lowered = part.lower()
            if lowered != self.lowered[at:at + len(part)]:
                return Prepared(part, _lowered=lowered)
        return self._part(part, at)

    def _part(self, part: str, start: int) -> Prepared:
        """``part`` (``text[start:start + len(part)]``) prepared with the hits inside it."""
        end = start + len(part)
        lowered = self._lowered
        if self._found is None:         # not scanned: the part scans itself if asked
            return Prepared(part, _lowered=None if lowered is None else lowered[start:end])
        hits: dict[str, list[int]] = {}
        for word, offsets in self._found.items():
            kept = offsets[bisect_left(offsets, start):bisect_left(offsets,
                                                                   end - len(word) + 1)]
            if kept:
                hits[word] = [offset - start for offset in kept] if start else kept
        return Prepared(part, _lowered=self.lowered[start:end], _hits=hits)

    def words(self, stoplist: frozenset[str] = frozenset()) -> list[str] | list[bytes]:
        """The tokens of :func:`words_of` (made once per stop list)."""
        found = self._words.get(stoplist)
        if found is None:
            found = self._words[stoplist] = words_of(self.text, stoplist, self._lowered)
        return found


def prepare(text: str, reuse: Sequence[Prepared] = ()) -> Prepared:
    """``text`` prepared, or one of ``reuse`` when it was made for this very string."""
    for prepared in reuse:
        if prepared is not None and prepared.text is text:
            return prepared
    return Prepared(text)


def first_word_at(text: str, start: int = 0) -> int:
    r"""Where the first letter or digit (``[^\W_]``) of ``text`` from ``start`` is; -1 if
    there is none.  On ASCII text by an ASCII class, which the regex engine tests six times
    as fast as the Unicode one: a crafted text of rule and blank lines is read to its end
    (14 against 2 ms a MB)."""
    pattern = _ASCII_LETTER_OR_DIGIT.get() if text.isascii() else token_pattern()
    found = pattern.search(text, start)
    return -1 if found is None else found.start()


def has_word(text: str) -> bool:
    """``text`` holds a letter or digit (see :func:`first_word_at`)."""
    return first_word_at(text) >= 0


class LineCursor:
    """Where the line holding each of a series of rising offsets of ``text`` starts, each
    found by searching only the text since the previous offset.  A step that reads many
    places of one line (a gateway link's keyword hits, a campaign's tokens) stays linear
    on a text of one long line, where ``rfind`` back from each place to the line's start
    was quadratic."""

    __slots__ = ("text", "start", "_searched_to", "_first_filled")

    def __init__(self, text: str) -> None:
        self.text = text
        self.start = 0                  # of the line at the last offset asked
        self._searched_to = 0
        self._first_filled: int | None = None   # that line's first non-blank, once asked

    def line_start(self, offset: int) -> int:
        """The start of the line that holds ``offset`` (not below the last one asked)."""
        if offset < self._searched_to:          # (not rising: search from the start)
            self._searched_to = self.start = 0
            self._first_filled = None
        newline = self.text.rfind("\n", self._searched_to, offset)
        self._searched_to = offset
        if newline >= 0:
            self.start = newline + 1
            self._first_filled = None
        return self.start

    def blank_before(self, offset: int) -> bool:
        """Only white space stands between the start of its line and ``offset`` (what
        ``text[line_start:offset].strip()`` says, read once a line)."""
        start = self.line_start(offset)
        if self._first_filled is None:
            found = NOT_SPACE.get().search(self.text, start)
            self._first_filled = len(self.text) if found is None else found.start()
        return self._first_filled >= offset


class Pattern:
    """A regular expression compiled on first use: most of a cleaning step's patterns never
    run for most messages (a keyword gate rules them out), and a process that checks one
    message (the pipe filter) would pay for compiling them all at start.  ``get()`` gives
    the compiled pattern (hot loops take it once); its methods are reachable on this object
    too (``pattern.search(...)``)."""

    __slots__ = ("source", "flags", "_compiled")

    def __init__(self, source: str, flags: int = 0) -> None:
        self.source = source
        self.flags = flags
        self._compiled = None

    def get(self):  # noqa: ANN201 - re.Pattern[str]
        compiled = self._compiled
        if compiled is None:
            import re
            compiled = self._compiled = re.compile(self.source, self.flags)
        return compiled

    def __getattr__(self, name: str):  # noqa: ANN204
        return getattr(self.get(), name)


# The first character that is not white space (LineCursor, quotes, normalise).
NOT_SPACE = Pattern(r"\S")
# On ASCII text, where a token (TOKEN_PATTERN) starts (first_word_at).
_ASCII_LETTER_OR_DIGIT = Pattern(r"[A-Za-z0-9]")
# A letter or digit beyond ASCII (see words_of).
_NON_ASCII_WORD = Pattern(r"[^\W_\x00-\x7f]")
