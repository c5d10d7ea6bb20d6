"""``resend-note``: its writer sending the stored message again — the same sender, and a
new text that is only a short note saying so ("Resending: my first email bounced back"),
above the stored message quoted — is a copy of it, though it looks like a reply to it."""

from __future__ import annotations

from mailfilter.names import NEAR_DUPLICATE
from mailfilter.rules.pair import Judgement, Pair, RuleName, names_stored


class ResendNoteRule:
    name = RuleName.RESEND_NOTE
    description = ("the stored message's own sender sends it again under a short note that "
                   "says so (\"resending, the first one bounced\"), the stored message quoted "
                   "or named in its References (near-duplicate)")

    def judge(self, pair: Pair) -> Judgement | None:
        new, stored = pair.new_features, pair.stored_features
        if not new.resend_note or not new.quoted or not new.sender \
                or new.sender != stored.sender:
            return None
        if not (names_stored(pair) or new.subject == stored.subject or pair.alike):
            return None
        return Judgement(NEAR_DUPLICATE, self.name, "resend", 1.0,
                         "its sender sends it again, with a note that says so")
