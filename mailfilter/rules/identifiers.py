"""``identifiers``: two messages alike in text (the same text, or alike by resemblance or
histogram) from one sender organisation whose data differ are two messages: the template
was filled anew.  Mail from programs on both sides must also agree on everything and be
``automated_threshold`` alike; the same report from another program address is another
report.  The same text from two local parts of one domain whose subjects differ only in
a number or code at their end is one campaign (:func:`one_campaign`)."""

from __future__ import annotations

from mailfilter.features import Features
from mailfilter.rules.histogram import histogram_score
from mailfilter.rules.pair import (
    Judgement,
    Pair,
    RuleName,
    automated_difference,
    identifier_conflict,
)


def one_campaign(new: Features, stored: Features) -> bool:
    """The same text from two local parts of one domain, under subjects that differ only
    in the numbers or codes at their end (features' subject_stem): a campaign draws both
    anew for each copy ("Call me 89218" from 53rrf1@, "Call me 54666" from yatlhx@).  One
    organisation's notices come from one address, so their subject data stay data, and
    so do a program's."""
    return bool(new.sender) and bool(stored.sender) and new.sender != stored.sender \
        and not (new.automated or stored.automated or new.notifier or stored.notifier) \
        and new.subject != stored.subject \
        and (new.subject_stem or new.subject) == (stored.subject_stem or stored.subject)


class IdentifiersRule:
    name = RuleName.IDENTIFIERS
    description = ("alike in text, from one sender organisation, but each side holds data "
                   "(numbers, codes, amounts, dates, host names, paths; not URLs, "
                   "addresses, tracking tokens) the other lacks: the template was filled "
                   "anew; mail from programs needs automated_threshold and identical data "
                   "(unique); the same text from two local parts of one domain whose "
                   "subjects differ only in a number or code at their end is one campaign "
                   "(passed on)")

    def judge(self, pair: Pair) -> Judgement | None:
        if not pair.alike:
            return None
        new, stored = pair.new_features, pair.stored_features
        conflict = identifier_conflict(pair) if pair.settings.compare_identifiers else None
        if pair.same_text:
            if conflict is not None and one_campaign(new, stored):
                return None     # rule digest: the same text again
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
