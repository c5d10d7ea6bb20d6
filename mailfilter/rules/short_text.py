"""``short-text``: a text under ``min_words`` words is never judged by resemblance; it is
the same message only when it is the same text *and* something beyond its words says so
(the same sender and thread, subject or quoted text; a forward naming the stored writer;
the same attachment).  "Thanks!" from two people is two messages."""

from __future__ import annotations

from mailfilter.names import DUPLICATE
from mailfilter.rules.pair import Judgement, Pair, RuleName, sender_context


class ShortTextRule:
    name = RuleName.SHORT_TEXT
    description = ("a text under min_words words is the same message only as the same "
                   "text with evidence beyond its words: same sender and thread, subject or "
                   "quoted text, a forward naming the stored sender, the same attachment "
                   "(duplicate, or unique)")

    def judge(self, pair: Pair) -> Judgement | None:
        settings = pair.settings
        if pair.same_text:      # and short: the digest rule took the long ones
            context = sender_context(pair.new_features, pair.stored_features)
            if context is not None:
                return Judgement(DUPLICATE, self.name, "digest", 1.0, f"same text; {context}")
            return Judgement(rule=self.name, note=(
                f"same text of {pair.new.word_count} word(s), but no other sign it is the "
                "same message (another sender, thread or subject)"))
        if pair.either_short:
            return Judgement(rule=self.name, note=(
                f"fewer than {settings.min_words} words on one side: exact match with "
                "context only"))
        return None
