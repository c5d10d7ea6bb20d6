"""``facts``: two short texts (up to 40 words) that are the same but for at most one word
in five, where a changed word is a number, a negation, a day, a month or a decision
("the build is broken" / "… is not broken", "the review on Thursday" / "… on Friday",
"approved" / "rejected"): the second says something else, however alike the two look.
Whoever sent them, they are two messages; a reader must get the correction."""

from __future__ import annotations

from mailfilter.rules.pair import Judgement, Pair, RuleName, changed_fact


class FactsRule:
    name = RuleName.FACTS
    description = ("two short texts (up to 40 words) the same but for at most one word in "
                   "five, one of them a number, a negation, a day, a month or a decision: "
                   "another fact (unique)")

    def judge(self, pair: Pair) -> Judgement | None:
        fact = changed_fact(pair)
        if fact is None:
            return None
        return Judgement(rule=self.name, note=f"the same short text with {fact} changed")
