"""The pair rules: is a stored message the same message as the new one, or another one that
looks alike?

Text measures (resemblance, the histogram) say how alike two bodies are; they cannot say
whether the second is the first *again*.  Different messages look alike all the time:
invitations from one organiser, notices from one template, cron reports, one-line replies,
messages under one company's disclaimer.  Each rule below answers one such question from
the message's :class:`~mailfilter.features.Features`, in order, and the first that decides
records why (as Mailman's rules do), so that ``explain`` can say it:

1. ``message-id`` — the same Message-ID is the same message.
2. ``calendar`` — two invitations are the same only for the same event in the same version
   (UID, SEQUENCE, times, method, answers); another UID, a higher SEQUENCE, another
   attendee's answer is news.
3. ``reply`` — a message that answers the stored one (its In-Reply-To/References name it)
   is not a copy of it, unless its own text is that text again.
4. ``digest`` — the same text; a short text (under ``min_words`` words) only with evidence
   beyond its words: the same sender and the same thread, subject or quoted text, or the
   same attachment.  "Thanks!" from two people is two messages.
5. ``attachments`` — the same attachment (same bytes, or chunk similarity at or above
   ``attachment_threshold``) is a near-duplicate when attachments are most of both
   messages' bytes, whatever the cover notes say.
6. ``resend`` — a short message sent again by the same sender in the same thread or under
   the same subject, with a line added.
7. ``shingles``/``histogram`` — alike enough by resemblance or by the histogram rule, and,
   when both come from one sender domain, agreeing on their data: when each has
   identifiers (numbers, codes, amounts, dates, host names) the other lacks, the template
   was filled with new data, and the message is new.  (Between different senders, data
   differ by design — tracking numbers of a campaign, a forwarder's dates — and do not
   decide.)
"""

from __future__ import annotations

from dataclasses import dataclass

from mailfilter.config import DetectorSettings
from mailfilter.features import AttachmentSummary, Features
from mailfilter.fingerprint import Fingerprint, message_id_key64
from mailfilter.identifiers import identifier_difference
from mailfilter.names import DUPLICATE, NEAR_DUPLICATE, UNIQUE


@dataclass(slots=True)
class Judgement:
    """What the rules made of one pair."""

    verdict: str = UNIQUE
    reason: str = ""             # the measure that matched (for the header's reason=)
    score: float | None = None
    rule: str = ""               # the rule that decided, either way
    note: str = ""               # why, in words (explain)
    attachment: AttachmentSummary | None = None


@dataclass(slots=True)
class Pair:
    """A new message and one stored record, with the measures already taken."""

    new: Fingerprint
    stored_words: int
    stored_digest: bytes
    stored_message_id: str | None
    same_message_id: bool
    new_features: Features
    stored_features: Features
    resemblance: float | None
    containment_of_stored: float | None   # share of the stored text the new one holds
    histogram_match: bool
    histogram_positions: int | None
    attachment_similarity: float | None
    stored_sketch: tuple[int, ...]


def _context(new: Features, stored: Features) -> str | None:
    """Evidence beyond a short text's words that it is the stored message again, in
    words; None when there is none."""
    shared = _shared_attachment(new, stored)
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


def _shared_attachment(new: Features, stored: Features) -> AttachmentSummary | None:
    """An attachment (1 KiB or more) both messages carry, byte for byte."""
    if not new.attachments or not stored.attachments:
        return None
    theirs = {a.digest for a in stored.attachments}
    return next((a for a in new.attachments if a.digest in theirs), None)


def _identifier_conflict(pair: Pair) -> str | None:
    """Words for identifiers each side has and the other lacks, when the two come from one
    sender domain; None when their data agree (or they come from different senders)."""
    new, stored = pair.new_features, pair.stored_features
    if not new.sender_domain or new.sender_domain != stored.sender_domain:
        return None
    missing, ours_extra, theirs_extra = identifier_difference(
        new.identifiers, new.identifier_bits, stored.identifiers, stored.identifier_bits)
    if not ours_extra or not theirs_extra:
        return None
    names = [name for name in pair.new.identifier_names if missing(name)]
    shown = ", ".join(names[:4]) + (", …" if len(names) > 4 else "")
    return f"identifiers differ: {shown or 'some'} here, others in the match"


def _same_text_conflict(pair: Pair, settings: DetectorSettings) -> str | None:
    """What makes one text two messages: other data in the subject from the same sender
    ("Your order #1001 has shipped", then #1002), or the same report from another program
    or host (two servers' cron mail with one output)."""
    new, stored = pair.new_features, pair.stored_features
    if settings.compare_identifiers:
        conflict = _identifier_conflict(pair)
        if conflict is not None:
            return conflict
    if new.automated and stored.automated and new.sender and stored.sender \
            and new.sender != stored.sender:
        return "sent by a program from another address (another host or service)"
    return None


def _automated_difference(pair: Pair, settings: DetectorSettings) -> str | None:
    """Two reports or notices from programs: anything in their data that differs, either
    way, or less than ``automated_threshold`` alike, makes them two (a report that lost a
    line, or changed one word, is a new report)."""
    new, stored = pair.new_features, pair.stored_features
    missing, ours_extra, theirs_extra = identifier_difference(
        new.identifiers, new.identifier_bits, stored.identifiers, stored.identifier_bits)
    if ours_extra or theirs_extra:
        names = [name for name in pair.new.identifier_names if missing(name)]
        shown = ", ".join(names[:4]) or "some"
        return f"sent by a program, and its data differ ({shown})"
    if (pair.resemblance or 0.0) < settings.automated_threshold and pair.resemblance is not None:
        return (f"sent by a program, and only {pair.resemblance:.2f} alike "
                f"(below {settings.automated_threshold:.2f})")
    return None


def _calendar(pair: Pair) -> Judgement | None:
    new, stored = pair.new_features.calendar, pair.stored_features.calendar
    if new is None or stored is None:
        return None
    if new.key == stored.key:
        return Judgement(DUPLICATE, "calendar", 1.0, "calendar",
                         f"same event, same version ({new.method}, SEQUENCE {new.sequence})")
    if new.uid != stored.uid:
        note = "calendar: another event (UID differs)"
    elif new.method != stored.method:
        note = f"calendar: {new.method} after {stored.method} of the event"
    elif new.sequence > stored.sequence:
        note = f"calendar: update of the event (SEQUENCE {new.sequence} after {stored.sequence})"
    elif new.method in ("REPLY", "COUNTER"):
        note = "calendar: another answer to the event"
    else:
        note = "calendar: the event changed (times, place or status)"
    return Judgement(rule="calendar", note=note)


def _attachments(pair: Pair, settings: DetectorSettings) -> Judgement | None:
    new, stored = pair.new_features, pair.stored_features
    if min(new.attachment_share, stored.attachment_share) < settings.attachment_share:
        return None
    shared = _shared_attachment(new, stored)
    if shared is not None:
        return Judgement(NEAR_DUPLICATE, "attachments", 1.0, "attachments",
                         f"same attachment {shared.name or '(no name)'} ({shared.size} bytes)",
                         shared)
    similarity = pair.attachment_similarity
    if similarity is not None and similarity >= settings.attachment_threshold:
        largest = new.attachments[0] if new.attachments else None
        return Judgement(NEAR_DUPLICATE, "attachments", similarity, "attachments",
                         f"attachment chunks {similarity:.2f} alike", largest)
    return None


def judge(pair: Pair, settings: DetectorSettings) -> Judgement:
    """The rules in order (see the module docstring); the first that decides wins."""
    new, stored = pair.new_features, pair.stored_features
    fp = pair.new
    if pair.same_message_id:
        return Judgement(DUPLICATE, "message-id", 1.0, "message-id", "same Message-ID")
    calendar = _calendar(pair)
    if calendar is not None:
        return calendar
    same_text = fp.digest == pair.stored_digest and (fp.word_count > 0
                                                     or fp.has_attachments)
    if not same_text and pair.stored_message_id and new.thread and \
            message_id_key64(pair.stored_message_id) in new.thread:
        return Judgement(rule="reply", note="a reply to the match (its References name it)")
    short = fp.word_count < settings.min_words
    if same_text:
        conflict = _same_text_conflict(pair, settings)
        if conflict is not None:
            return Judgement(rule="identifiers", note=f"same text, but {conflict}")
        if not short:
            return Judgement(DUPLICATE, "digest", 1.0, "digest", "same text")
        context = _context(new, stored)
        if context is not None:
            return Judgement(DUPLICATE, "digest", 1.0, "short-text", f"same text; {context}")
        return Judgement(rule="short-text", note=(
            f"same text of {fp.word_count} word(s), but no other sign it is the same message "
            "(another sender, thread or subject)"))
    attachments = _attachments(pair, settings)
    if attachments is not None:
        return attachments
    if short or pair.stored_words < settings.min_words:
        return _short(pair, settings)
    alike = None
    threshold, why = _threshold(pair, settings)
    if pair.resemblance is not None and pair.resemblance >= threshold:
        alike = Judgement(NEAR_DUPLICATE, "shingles", pair.resemblance, "shingles", why)
    elif pair.histogram_match:
        alike = Judgement(NEAR_DUPLICATE, "histogram",
                          1.0 - (pair.histogram_positions or 0) / 36.0, "histogram")
    if alike is None:
        return Judgement(rule="subject" if why and threshold > settings.resemblance_threshold
                         else "", note=_why_not(pair, threshold, why))
    conflict = _identifier_conflict(pair) if settings.compare_identifiers else None
    if conflict is None and pair.new_features.automated and pair.stored_features.automated:
        conflict = _automated_difference(pair, settings)
    if conflict is not None:
        return Judgement(rule="identifiers", note=f"{alike.reason} {alike.score:.2f}, but "
                         f"{conflict}")
    return alike


def _short(pair: Pair, settings: DetectorSettings) -> Judgement:
    """A short text (either side): the stored short message sent again with a line added,
    or nothing."""
    new, stored = pair.new_features, pair.stored_features
    contained = (pair.stored_sketch and set(pair.stored_sketch) <= set(pair.new.sketch)) \
        or pair.stored_digest in pair.new.part_digests
    if (pair.stored_words < settings.min_words and contained
            and pair.new.word_count <= pair.stored_words + settings.min_words):
        context = _context(new, stored)
        if context is not None and _identifier_conflict(pair) is None:
            return Judgement(NEAR_DUPLICATE, "resend", 1.0, "resend",
                             f"its whole short text again, with a line added; {context}")
    return Judgement(rule="short-text", note=(
        f"fewer than {settings.min_words} words on one side: exact match with context only"))


def _related(new: Features, stored: Features, stored_message_id: str | None) -> bool:
    """One thread: a shared thread id, or one names the other."""
    if new.thread and stored.thread and set(new.thread) & set(stored.thread):
        return True
    return bool(stored_message_id and new.thread
                and message_id_key64(stored_message_id) in new.thread)


def _threshold(pair: Pair, settings: DetectorSettings) -> tuple[float, str]:
    """The resemblance a pair needs, and why it is not the usual one ("" if it is)."""
    new, stored = pair.new_features, pair.stored_features
    if new.subject and stored.subject and new.sender_domain \
            and new.sender_domain == stored.sender_domain:
        answers_apart = bool(new.thread and stored.thread
                             and new.thread[-1] != stored.thread[-1])
        if new.subject == stored.subject and new.sender == stored.sender \
                and not new.is_reply and not stored.is_reply:
            return settings.same_subject_threshold, "same sender, same subject"
        if new.subject != stored.subject and not _related(new, stored,
                                                          pair.stored_message_id):
            return settings.other_subject_threshold, \
                "same sender domain, another subject, another thread"
        if answers_apart:
            # Two answers to different messages are two messages unless nearly the same
            # text: what they share is a signature or disclaimer.
            return settings.other_subject_threshold, \
                "same sender domain, answers to different messages"
    return settings.resemblance_threshold, ""


def _why_not(pair: Pair, threshold: float, why: str) -> str:
    if pair.resemblance is not None:
        return (f"resemblance {pair.resemblance:.2f} below {threshold:.2f}"
                + (f" ({why})" if why else ""))
    return "stored message too short for shingles"
