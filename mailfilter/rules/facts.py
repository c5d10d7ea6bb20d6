"""``facts``: two short texts (up to 40 words) that are the same but for at most one word
in five, where a changed word is a negation, a day, a month or a decision ("the build is
broken" / "… is not broken", "the review on Thursday" / "… on Friday", "approved" /
"rejected"): the second says something else, however alike the two look.  From one
sender organisation (one person, or colleagues) they are two messages; a reader must get
the correction.  (From two organisations the other rules weigh the pair: a campaign's next
wave from other domains with a new deadline is still the campaign.)  (A changed number is
rule ``identifiers``' to weigh: a template's new data, or a campaign's random number.)"""

from __future__ import annotations

from mailfilter.rules.pair import Judgement, Pair, RuleName, changed_fact


class FactsRule:
    name = RuleName.FACTS
    description = ("two short texts (up to 40 words) of one sender organisation, the same "
                   "but for at most one word in five, one of them a negation, a day, a "
                   "month or a decision: another fact (unique)")

    def judge(self, pair: Pair) -> Judgement | None:
        fact = changed_fact(pair)
        if fact is None:
            return None
        return Judgement(rule=self.name, note=f"the same short text with {fact} changed")
