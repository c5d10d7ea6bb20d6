"""``digest``: the same text (its exact digest), of ``min_words`` words or more, is the
same message."""

from __future__ import annotations

from mailfilter.names import DUPLICATE
from mailfilter.rules.pair import Judgement, Pair, RuleName


class DigestRule:
    name = RuleName.DIGEST
    description = "the same text, of min_words words or more (duplicate)"

    def judge(self, pair: Pair) -> Judgement | None:
        if not pair.same_text or pair.short:
            return None
        return Judgement(DUPLICATE, self.name, "digest", 1.0, "same text")
