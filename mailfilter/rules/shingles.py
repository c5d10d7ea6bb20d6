"""``shingles``: word 5-gram resemblance (Broder, from the bottom-k sketches, boilerplate
discounted) at or above the threshold the pair's context sets."""

from __future__ import annotations

from mailfilter.names import NEAR_DUPLICATE
from mailfilter.rules.pair import Judgement, Pair, RuleName


class ShinglesRule:
    name = RuleName.SHINGLES
    description = ("word-shingle resemblance at or above the threshold the subject row "
                   "sets, both texts of min_words words or more (near-duplicate)")

    def judge(self, pair: Pair) -> Judgement | None:
        if not pair.shingles_match:
            return None
        why = pair.threshold_why
        return Judgement(NEAR_DUPLICATE, self.name, "shingles", pair.resemblance,
                         f"word-shingle resemblance {pair.resemblance:.2f}"
                         + (f" (threshold set by: {why})" if why else ""))
