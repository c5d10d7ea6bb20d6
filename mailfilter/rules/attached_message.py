"""``attached-message``: a message that carries the stored one whole (forwarded as an
attachment: message/rfc822, or an .eml file) is a copy of it for whoever had it."""

from __future__ import annotations

from mailfilter.names import NEAR_DUPLICATE
from mailfilter.rules.pair import Judgement, Pair, RuleName


class AttachedMessageRule:
    name = RuleName.ATTACHED_MESSAGE
    description = ("the stored message is attached whole to the new one (forwarded as an "
                   "attachment; its own digest) (near-duplicate)")

    def judge(self, pair: Pair) -> Judgement | None:
        if pair.stored_digest not in pair.new.attached_digests or pair.stored_words == 0:
            return None
        return Judgement(NEAR_DUPLICATE, self.name, "attached", 1.0,
                         "the stored message, forwarded as an attachment")
