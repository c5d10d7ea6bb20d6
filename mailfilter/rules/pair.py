"""What every pair rule reads: a :class:`Pair` (the new message, one stored record, the
measures already taken and the facts derived from them once), what a rule answers (a
:class:`Judgement`), and the evidence several rules weigh (the sender context of a short
text, a shared attachment, data that differ).  Pure: no store, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import ClassVar, Protocol

from mailfilter.config import DetectorSettings
from mailfilter.features import FACT_WORD, WORDS_MAX, AttachmentSummary, Features
from mailfilter.fingerprint import Fingerprint, message_id_key64
from mailfilter.identifiers import identifier_difference
from mailfilter.names import UNIQUE, Kind
from mailfilter.values import Fields, Value, derived, init


class RuleName(StrEnum):
    """The pair rules, by the name ``explain``, logs and JSON show."""

    MESSAGE_ID = "message-id"
    ATTACHED_MESSAGE = "attached-message"
    CALENDAR = "calendar"
    RESEND_NOTE = "resend-note"
    REPLY = "reply"
    NOTIFIER = "notifier"
    ATTACHMENTS = "attachments"
    IDENTIFIERS = "identifiers"
    FACTS = "facts"
    DIGEST = "digest"
    RESEND = "resend"
    RESENT_ORIGINAL = "resent-original"
    SHORT_TEXT = "short-text"
    SHINGLES = "shingles"
    EDITED_COPY = "edited-copy"
    HISTOGRAM = "histogram"
    SUBJECT = "subject"


class Judgement(Value):
    """What a rule made of one pair: a verdict kind, the measure that matched (the
    header's ``reason=``), its score, the rule and why in words (``explain``)."""

    __slots__ = ("kind", "rule", "measure", "score", "note", "attachment")

    def __init__(self, kind: Kind = UNIQUE,
                 rule: RuleName | None = None,      # None: no rule decided (nothing alike enough)
                 measure: str = "", score: float | None = None, note: str = "",
                 attachment: AttachmentSummary | None = None) -> None:
        init(self, kind=kind, rule=rule, measure=measure, score=score, note=note,
             attachment=attachment)


class Rule(Protocol):
    """One pair rule: its name, what it decides in one line, and the judgement itself."""

    name: ClassVar[RuleName]
    description: ClassVar[str]

    def judge(self, pair: Pair) -> Judgement | None:
        """The rule's judgement of ``pair``, or None to let the next rule judge."""
        ...


class Pair(Fields):
    """A new message and one stored record, with the measures the detector took.

    The facts several rules share (``same_text``, ``short``, ``threshold``, ``alike`` …)
    are derived once, on first use (kept in ``__dict__``).  Compared by identity.
    """

    __slots__ = ("new", "stored_words", "stored_digest", "stored_message_id",
                 "same_message_id", "new_features", "stored_features", "resemblance",
                 "containment_of_stored", "histogram_positions", "histogram_sum_distance",
                 "histogram_chars", "attachment_similarity", "stored_sketch", "settings",
                 "__dict__")
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __init__(
        self,
        new: Fingerprint,
        stored_words: int,
        stored_digest: bytes,
        stored_message_id: str | None,
        same_message_id: bool,
        new_features: Features,
        stored_features: Features,
        resemblance: float | None,
        containment_of_stored: float | None,   # share of the stored text the new one holds
        histogram_positions: int | None,       # bins that differ (of 36)
        histogram_sum_distance: int,           # |sum of the new histogram - the stored one's|
        histogram_chars: int,                  # characters the stored histogram counted
        attachment_similarity: float | None,
        stored_sketch: tuple[int, ...],
        settings: DetectorSettings,
    ) -> None:
        self.new = new
        self.stored_words = stored_words
        self.stored_digest = stored_digest
        self.stored_message_id = stored_message_id
        self.same_message_id = same_message_id
        self.new_features = new_features
        self.stored_features = stored_features
        self.resemblance = resemblance
        self.containment_of_stored = containment_of_stored
        self.histogram_positions = histogram_positions
        self.histogram_sum_distance = histogram_sum_distance
        self.histogram_chars = histogram_chars
        self.attachment_similarity = attachment_similarity
        self.stored_sketch = stored_sketch
        self.settings = settings

    @derived
    def same_text(self) -> bool:
        """The same text (exact digest), and not two empty bodies."""
        return self.new.digest == self.stored_digest and (
            self.new.word_count > 0 or self.new.has_attachments)

    @derived
    def short(self) -> bool:
        """The new message's text is under ``min_words`` words."""
        return self.new.word_count < self.settings.min_words

    @derived
    def either_short(self) -> bool:
        """One side's text is under ``min_words`` words: never judged by resemblance."""
        return self.short or self.stored_words < self.settings.min_words

    @derived
    def _threshold(self) -> tuple[float, str]:
        return resemblance_threshold(self)

    @property
    def threshold(self) -> float:
        """The resemblance this pair needs (see :func:`resemblance_threshold`)."""
        return self._threshold[0]

    @property
    def threshold_why(self) -> str:
        """Why the threshold is not the usual one ("" when it is)."""
        return self._threshold[1]

    @derived
    def histogram_match(self) -> bool:
        """Seed 000's rule: both bodies long enough, sums within the window, at most
        ``histogram_max_positions`` bins apart."""
        s = self.settings
        return (s.histogram_rule and self.histogram_positions is not None
                and self.new.histogram_chars >= s.histogram_min_chars
                and self.histogram_chars >= s.histogram_min_chars
                and self.histogram_sum_distance <= s.histogram_window
                and self.histogram_positions <= s.histogram_max_positions)

    @derived
    def shingles_match(self) -> bool:
        """Both texts long enough and resembling at or above the pair's threshold."""
        return (not self.either_short and self.resemblance is not None
                and self.resemblance >= self.threshold)

    @derived
    def word_changes(self) -> tuple[int, list[int]] | None:
        """:func:`changed_words` of two short texts (both with word keys, not the same
        text), once for every rule that reads it; None otherwise."""
        new, stored = self.new_features.words, self.stored_features.words
        if not new or not stored or self.same_text:
            return None
        return changed_words(new, stored)

    @derived
    def alike(self) -> bool:
        """The same text, or (both long enough) alike by resemblance or histogram."""
        return self.same_text or (not self.either_short
                                  and (self.shingles_match or self.histogram_match))


# -- evidence several rules weigh ----------------------------------------------------------

def sender_context(new: Features, stored: Features) -> str | None:
    """Evidence beyond a short text's words that it is the stored message again, in
    words; None when there is none."""
    shared = shared_attachment(new, stored)
    if shared is not None:
        return f"same attachment {shared.name or shared.size}"
    if new.forwarded_from and ({stored.sender, stored.sender_name} - {0}) & set(
            new.forwarded_from) and (
            (new.subject and new.subject == stored.subject)
            or (new.quoted and new.quoted == stored.quoted)):
        # A forward of the stored writer's message, under its subject: that message
        # again (two people's own words alike never name each other this way).
        return "forwards the stored sender's message, same subject"
    same_address = bool(new.sender) and new.sender == stored.sender
    same_name = bool(new.sender_name) and new.sender_name == stored.sender_name
    if (new.sender, new.sender_name, new.subject) == (
            stored.sender, stored.sender_name, stored.subject) \
            and bool(new.sender) != bool(new.subject) and not new.thread \
            and not stored.thread:
        # The same From and Subject fields, one of them missing on both (a test message
        # with no Subject, a script's mail with no From), and no thread: nothing tells the
        # second delivery from the first.
        return "same From and Subject fields (one blank on both), no thread"
    if not same_address and not same_name:   # a list may have rewritten the address
        return None
    if new.thread and stored.thread:
        if set(new.thread) & set(stored.thread):
            return "same sender, same thread"
        return None     # both answer something, and not the same thing
    if new.subject and new.subject == stored.subject:
        return "same sender, same subject"
    if new.quoted and new.quoted == stored.quoted:
        return "same sender, same quoted text"
    return None


def changed_words(new: tuple[int, ...], stored: tuple[int, ...]
                  ) -> tuple[int, list[int]] | None:
    """The words of either text outside their longest common subsequence (a word
    replaced counts once on each side), as (edits, those words' keys); None when there
    are more than one in five of the longer text's words (at least 2 allowed).  Both
    texts are at most WORDS_MAX words: the table is bounded.

    The table is kept one row an integer, bit j set where the common length does not
    grow at column j + 1 (Hyyrö's bit-parallel form): a row is four integer operations,
    not a Python step for each of its cells, and a cell is read back, for the walk that
    names the changed words, by counting bits.  The walk takes the same path through the
    same table as a cell-by-cell one would (tests/test_rule_units.py holds them equal)."""
    longer = max(len(new), len(stored))
    allowed = max(2, longer // 5)
    if abs(len(new) - len(stored)) > allowed or longer > WORDS_MAX:
        return None
    full = (1 << len(stored)) - 1
    matches: dict[int, int] = {}
    for j, word in enumerate(stored):
        matches[word] = matches.get(word, 0) | 1 << j
    rows = [full]                       # row 0: no word of ``new``, nothing in common
    row = full
    for word in new:
        match = row & matches.get(word, 0)
        row = ((row + match) | (row - match)) & full
        rows.append(row)
    common = len(stored) - row.bit_count()
    if longer - common > allowed:
        return None
    changed: list[int] = []
    i, j = len(new), len(stored)
    while i and j:
        if new[i - 1] == stored[j - 1]:
            i, j = i - 1, j - 1
        # table[i - 1][j] >= table[i][j - 1], each cell the zero bits below its column
        elif j - (rows[i - 1] & ((1 << j) - 1)).bit_count() >= \
                j - 1 - (rows[i] & ((1 << (j - 1)) - 1)).bit_count():
            i -= 1
            changed.append(new[i])
        else:
            j -= 1
            changed.append(stored[j])
    changed += new[:i] + stored[:j]
    return longer - common, changed


def changed_fact(pair: Pair) -> str | None:
    """Words for a fact that differs between two short texts of one sender organisation
    otherwise the same (at most one word in five changed, :func:`changed_words`): a
    changed word that is a negation, a day, a month or a decision (features.FACT_WORDS).
    None when the texts are long, the same, further apart, or from two organisations (a
    campaign's next wave from other domains with a new deadline is still the campaign, as
    rule identifiers weighs data).  (Numbers are the identifiers' to weigh: rule
    identifiers knows a campaign's random number from a template's new data.)"""
    new, stored = pair.new_features, pair.stored_features
    if not new.sender_domain or new.sender_domain != stored.sender_domain:
        return None
    found = pair.word_changes
    if found is None or not any(key & FACT_WORD for key in found[1]):
        return None
    return "a negation, a day, a month or a decision"


def shared_attachment(new: Features, stored: Features) -> AttachmentSummary | None:
    """An attachment (1 KiB or more) both messages carry, byte for byte."""
    if not new.attachments or not stored.attachments:
        return None
    theirs = {a.digest for a in stored.attachments}
    return next((a for a in new.attachments if a.digest in theirs), None)


def _missing_names(pair: Pair, missing: Callable[[str], bool]) -> list[str]:
    """The new message's identifiers the stored one lacks, in the order of its text."""
    return [name for name in pair.new.identifier_names if missing(name)]


def identifier_conflict(pair: Pair) -> str | None:
    """Words for identifiers each side has and the other lacks, when the two come from one
    sender domain; None when their data agree (or they come from different senders)."""
    new, stored = pair.new_features, pair.stored_features
    if not new.sender_domain or new.sender_domain != stored.sender_domain:
        return None
    missing, ours_extra, theirs_extra = identifier_difference(
        new.identifiers, new.identifier_bits, stored.identifiers, stored.identifier_bits)
    if not ours_extra or not theirs_extra:
        return None
    names = _missing_names(pair, missing)
    shown = ", ".join(names[:4]) + (", …" if len(names) > 4 else "")
    return f"identifiers differ: {shown or 'some'} here, others in the match"


def automated_difference(pair: Pair) -> str | None:
    """Two reports or notices from programs: anything in their data that differs, either
    way, or less than ``automated_threshold`` alike, makes them two (a report that lost a
    line, or changed one word, is a new report)."""
    new, stored = pair.new_features, pair.stored_features
    missing, ours_extra, theirs_extra = identifier_difference(
        new.identifiers, new.identifier_bits, stored.identifiers, stored.identifier_bits)
    if ours_extra or theirs_extra:
        shown = ", ".join(_missing_names(pair, missing)[:4])
        return f"sent by a program, and its data differ ({shown or 'some'})"
    threshold = pair.settings.automated_threshold
    if pair.resemblance is not None and pair.resemblance < threshold:
        return (f"sent by a program, and only {pair.resemblance:.2f} alike "
                f"(below {threshold:.2f})")
    return None


def related(new: Features, stored: Features, stored_message_id: str | None) -> bool:
    """One thread: a shared thread id, or one names the other."""
    if new.thread and stored.thread and set(new.thread) & set(stored.thread):
        return True
    return bool(stored_message_id and new.thread
                and message_id_key64(stored_message_id) in new.thread)


def names_stored(pair: Pair) -> bool:
    """The new message's In-Reply-To/References name the stored message."""
    return bool(pair.stored_message_id and pair.new_features.thread
                and message_id_key64(pair.stored_message_id) in pair.new_features.thread)


def resemblance_threshold(pair: Pair) -> tuple[float, str]:
    """The resemblance a pair needs, and why it is not the usual one ("" if it is): one
    sender under one subject needs less (``same_subject_threshold``); one sender domain
    under another subject or thread, or two answers to different messages, more
    (``other_subject_threshold``)."""
    settings = pair.settings
    new, stored = pair.new_features, pair.stored_features
    if new.subject and stored.subject and new.sender_domain \
            and new.sender_domain == stored.sender_domain:
        answers_apart = bool(new.thread and stored.thread
                             and new.thread[-1] != stored.thread[-1])
        if new.subject == stored.subject and new.sender == stored.sender \
                and not new.is_reply and not stored.is_reply:
            return settings.same_subject_threshold, "same sender, same subject"
        if new.subject != stored.subject and not related(new, stored,
                                                         pair.stored_message_id):
            return settings.other_subject_threshold, \
                "same sender domain, another subject, another thread"
        if answers_apart:
            # Two answers to different messages are two messages unless nearly the same
            # text: what they share is a signature or disclaimer.
            return settings.other_subject_threshold, \
                "same sender domain, answers to different messages"
    return settings.resemblance_threshold, ""
