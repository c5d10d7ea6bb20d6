"""``message-id``: the same Message-ID is the same message."""

from __future__ import annotations

from mailfilter.names import DUPLICATE
from mailfilter.rules.pair import Judgement, Pair, RuleName


class MessageIdRule:
    name = RuleName.MESSAGE_ID
    description = "the same Message-ID is the same message (duplicate)"

    def judge(self, pair: Pair) -> Judgement | None:
        if not pair.same_message_id:
            return None
        return Judgement(DUPLICATE, self.name, "message-id", 1.0, "same Message-ID")
