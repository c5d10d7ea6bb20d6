"""``resend``: a short message sent again by the same sender, in the same thread or under
the same subject, with a line added (its whole text found in the new one)."""

from __future__ import annotations

from mailfilter.names import NEAR_DUPLICATE
from mailfilter.rules.pair import (
    Judgement,
    Pair,
    RuleName,
    identifier_conflict,
    sender_context,
)


class ResendRule:
    name = RuleName.RESEND
    description = ("a short message sent again by the same sender in the same thread or "
                   "under the same subject, with a line added: its text found whole in the "
                   "new one (near-duplicate)")

    def judge(self, pair: Pair) -> Judgement | None:
        settings = pair.settings
        if pair.same_text or not pair.either_short \
                or pair.stored_words >= settings.min_words \
                or pair.new.word_count > pair.stored_words + settings.min_words:
            return None
        contained = (pair.stored_sketch and set(pair.stored_sketch) <= set(pair.new.sketch)) \
            or pair.stored_digest in pair.new.part_digests
        if not contained:
            return None
        context = sender_context(pair.new_features, pair.stored_features)
        if context is None or identifier_conflict(pair) is not None:
            return None
        return Judgement(NEAR_DUPLICATE, self.name, "resend", 1.0,
                         f"its whole short text again, with a line added; {context}")
