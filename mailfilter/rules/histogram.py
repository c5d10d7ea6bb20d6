"""``histogram``: seed 000's rule — two bodies of at least ``histogram_min_chars`` counted
characters whose histogram sums lie within ``histogram_window`` and whose 36 bins differ in
at most ``histogram_max_positions`` places."""

from __future__ import annotations

from mailfilter.fingerprint import HISTOGRAM_BINS
from mailfilter.names import NEAR_DUPLICATE
from mailfilter.rules.pair import Judgement, Pair, RuleName


def histogram_score(pair: Pair) -> float:
    """The share of the 36 bins that agree."""
    return 1.0 - (pair.histogram_positions or 0) / HISTOGRAM_BINS


class HistogramRule:
    name = RuleName.HISTOGRAM
    description = ("seed 000's character histogram: sums within the window (±2), at most "
                   "2 of 36 bins apart, both bodies of 2,000 counted characters or more "
                   "(near-duplicate)")

    def judge(self, pair: Pair) -> Judgement | None:
        if pair.either_short or not pair.histogram_match:
            return None
        return Judgement(NEAR_DUPLICATE, self.name, "histogram", histogram_score(pair),
                         f"{pair.histogram_positions} of {HISTOGRAM_BINS} character-"
                         "histogram bins differ, within the sum window")
