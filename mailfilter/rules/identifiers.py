"""``identifiers``: two messages alike in text (the same text, or alike by resemblance or
histogram) from one sender organisation whose data differ are two messages: the template
was filled anew.  Mail from programs on both sides must also agree on everything and be
``automated_threshold`` alike; the same report from another program address is another
report."""

from __future__ import annotations

from mailfilter.rules.histogram import histogram_score
from mailfilter.rules.pair import (
    Judgement,
    Pair,
    RuleName,
    automated_difference,
    identifier_conflict,
)


class IdentifiersRule:
    name = RuleName.IDENTIFIERS
    description = ("alike in text, from one sender organisation, but each side holds data "
                   "(numbers, codes, amounts, dates, host names, paths; not URLs, "
                   "addresses, tracking tokens) the other lacks: the template was filled "
                   "anew; mail from programs needs automated_threshold and identical data "
                   "(unique)")

    def judge(self, pair: Pair) -> Judgement | None:
        if not pair.alike:
            return None
        new, stored = pair.new_features, pair.stored_features
        conflict = identifier_conflict(pair) if pair.settings.compare_identifiers else None
        if pair.same_text:
            if conflict is None and new.automated and stored.automated and new.sender \
                    and stored.sender and new.sender != stored.sender:
                conflict = "sent by a program from another address (another host or service)"
            if conflict is None:
                return None
            return Judgement(rule=self.name, note=f"same text, but {conflict}")
        if conflict is None and new.automated and stored.automated:
            conflict = automated_difference(pair)
        if conflict is None:
            return None
        measure, score = ("shingles", pair.resemblance) if pair.shingles_match else \
            ("histogram", histogram_score(pair))
        return Judgement(rule=self.name, note=f"{measure} {score:.2f}, but {conflict}")
