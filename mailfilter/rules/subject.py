"""``subject``: the resemblance a pair needs depends on its context: one sender under one
subject needs ``same_subject_threshold``; one sender domain under another subject or
thread, or two answers to different messages, ``other_subject_threshold``.  This rule
names itself when a raised threshold kept a pair apart."""

from __future__ import annotations

from mailfilter.rules.pair import Judgement, Pair, RuleName


def why_not(pair: Pair) -> str:
    """Why a pair was not alike enough, in words."""
    if pair.resemblance is not None:
        why = pair.threshold_why
        return (f"resemblance {pair.resemblance:.2f} below {pair.threshold:.2f}"
                + (f" ({why})" if why else ""))
    return "stored message too short for shingles"


class SubjectRule:
    name = RuleName.SUBJECT
    description = ("one sender domain with another subject or thread, or two answers to "
                   "different messages, needs other_subject_threshold; one sender under one "
                   "subject same_subject_threshold (unique below it)")

    def judge(self, pair: Pair) -> Judgement | None:
        if not pair.threshold_why or pair.threshold <= pair.settings.resemblance_threshold:
            return None
        return Judgement(rule=self.name, note=why_not(pair))
