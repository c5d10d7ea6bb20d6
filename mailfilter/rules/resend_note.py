"""``resend-note``: its writer sending the stored message again — the same sender, and a
new text that is only a short note saying so ("Resending: my first email bounced back",
"Any update?"), above the stored message quoted, or above the whole of it forwarded — is a
copy of it, though it looks like a reply to it.  Another sender's such note over it is a
reply (unique): the message it quotes is compared cleaned, so its text is the stored
text again."""

from __future__ import annotations

from mailfilter.names import NEAR_DUPLICATE
from mailfilter.rules.pair import Judgement, Pair, RuleName, names_stored

# Forwarded under the note rather than quoted: this share of the stored text held.
HELD = 0.9


def _holds_short(pair: Pair) -> bool:
    """A short stored text (under ``min_words``: never measured by resemblance) held
    whole in the new one: each of its shingles there ("Any update?" over a one-line
    question, under another subject)."""
    return bool(pair.stored_sketch) and pair.stored_words < pair.settings.min_words \
        and set(pair.stored_sketch) <= set(pair.new.sketch)


class ResendNoteRule:
    name = RuleName.RESEND_NOTE
    description = ("the stored message's own sender sends it again under a short note that "
                   "says so (\"resending, the first one bounced\", \"any update?\"), the "
                   "stored message quoted, or held whole and named in its References "
                   "(near-duplicate); another sender's such note over it is a reply "
                   "(unique)")

    def judge(self, pair: Pair) -> Judgement | None:
        new, stored = pair.new_features, pair.stored_features
        if not new.resend_note or not new.sender:
            return None
        if new.sender != stored.sender:
            if new.quoted and stored.sender and not new.forwarded_from:
                # Someone else's "any update?" over the message: a reply, news.  (Over
                # a forward of it, the forward is the copy: the later rules judge.)
                return Judgement(rule=self.name, note="another sender's note over the "
                                 "message quoted: a reply, not its copy")
            return None
        # Above the stored message quoted, or, in its thread (else rule resent-original
        # judges), forwarded whole: "TR:" over an Outlook reply block.
        if not new.quoted and ((pair.containment_of_stored or 0.0) < HELD
                               or not names_stored(pair)):
            return None
        if not (names_stored(pair) or new.subject == stored.subject or pair.alike
                or _holds_short(pair)):
            return None
        return Judgement(NEAR_DUPLICATE, self.name, "resend", 1.0,
                         "its sender sends it again, with a note that says so")
