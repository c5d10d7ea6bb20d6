"""``reply``: a message that answers the stored one is not a copy of it, unless its own
text is that text again."""

from __future__ import annotations

from mailfilter.rules.pair import Judgement, Pair, RuleName, names_stored


class ReplyRule:
    name = RuleName.REPLY
    description = ("a reply to the stored message (its In-Reply-To/References name it) is "
                   "not its copy, unless its text is that text again (unique)")

    def judge(self, pair: Pair) -> Judgement | None:
        if pair.same_text or not names_stored(pair):
            return None
        return Judgement(rule=self.name, note="a reply to the match (its References name it)")
