"""``resent-original``: the stored message's own sender sends its whole text again under
another subject or thread, with a short note above it ("in case this got lost, see
below") or re-sent with a few changes (a newsletter re-sent with a correction): the text
the reader already had, again.  A reply quoting it is no such copy (its quoted original is
set aside, and the ``reply`` rule runs first)."""

from __future__ import annotations

from mailfilter.names import NEAR_DUPLICATE
from mailfilter.rules.pair import (
    Judgement,
    Pair,
    RuleName,
    identifier_conflict,
    names_stored,
)

# A note over the original: at most this many words added to it.
NOTE_WORDS = 40
# The stored text found whole in the new one: this share of it (sketch containment).
CONTAINED = 0.9
# Under a note that says it is sent again: this alike, or this share of the stored text
# held, is enough (a newsletter re-sent with a correction).
NOTED_RESEMBLANCE = 0.5
NOTED_CONTAINED = 0.8
# ... and this alike, its data may differ too (the correction the note announces).
CORRECTED_RESEMBLANCE = 0.8
# Shorter stored texts are found whole only as a paragraph (or line) of the new text.
MIN_STORED_WORDS = 6


def _holds_stored(pair: Pair, share: float) -> bool:
    """The new text holds the stored one whole: ``share`` of it by sketch containment;
    a text under ``min_words`` words only as a paragraph (or line) of the new one that is
    shown as that sender's message (forwarded with its header) or under a re-send note
    (a short line alike in two texts is no copy: two forwards' leftover header lines)."""
    if pair.containment_of_stored is not None:
        return pair.containment_of_stored >= share \
            or pair.stored_digest in pair.new.part_digests
    new, stored = pair.new_features, pair.stored_features
    shown = new.resend_note or bool(
        ({stored.sender, stored.sender_name} - {0}) & set(new.forwarded_from))
    return shown and pair.stored_words >= MIN_STORED_WORDS \
        and pair.stored_digest in pair.new.part_digests


class ResentOriginalRule:
    name = RuleName.RESENT_ORIGINAL
    description = ("the stored message's sender sends its whole text again under another "
                   "subject or thread, under a note of at most 40 words, or under a note "
                   "that says it is sent again (0.5 alike or 0.8 of it held), its data "
                   "unchanged unless 0.8 alike (near-duplicate)")

    def judge(self, pair: Pair) -> Judgement | None:
        new, stored = pair.new_features, pair.stored_features
        if pair.same_text or not new.sender or new.sender != stored.sender \
                or new.subject == stored.subject or names_stored(pair) \
                or (new.automated and stored.automated):
            return None     # (under one subject the usual measures judge it)
        added = pair.new.word_count - pair.stored_words
        corrected = False
        if new.resend_note and not new.quoted:
            held = (pair.resemblance or 0.0) >= NOTED_RESEMBLANCE \
                or _holds_stored(pair, NOTED_CONTAINED)
            # "Correction: the date was wrong, the corrected issue below": its data may
            # differ where nearly all else is the same.
            corrected = (pair.resemblance or 0.0) >= CORRECTED_RESEMBLANCE
            how = "under a note that says it is sent again"
        else:
            held = added <= NOTE_WORDS and _holds_stored(pair, CONTAINED)
            how = f"under a note of {max(added, 0)} words"
        if not held or (not corrected and identifier_conflict(pair) is not None):
            return None
        return Judgement(NEAR_DUPLICATE, self.name, "resend", 1.0,
                         f"its sender sends its whole text again, {how}")
