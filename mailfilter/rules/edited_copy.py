"""``edited-copy``: a short message sent again by its sender under the same subject, in the
same thread and over the same quoted text, with a few words changed (a resend with its
wording corrected).  Five-word shingles cannot see such a copy (three edits in twenty
words can leave no shingle in common), so the two texts are compared word by word (their
``Features.words``): at most one word in five changed and the rest in the same order.  A
changed number, negation, day, month or decision is a changed fact, never wording (rule
``facts`` decides the words first; a number changed leaves the pair to the others); a
program's notices (their next event changes a word) and texts under ``min_words`` are
left to the other rules."""

from __future__ import annotations

from mailfilter.features import DIGIT_WORD
from mailfilter.names import NEAR_DUPLICATE
from mailfilter.rules.pair import (
    Judgement,
    Pair,
    RuleName,
    changed_fact,
    identifier_conflict,
)


class EditedCopyRule:
    name = RuleName.EDITED_COPY
    description = ("a short message (min_words to 40 words) sent again by the same sender "
                   "under the same subject, thread and quoted text with at most one word "
                   "in five changed, no number, negation, day, month or decision among them "
                   "(near-duplicate)")

    def judge(self, pair: Pair) -> Judgement | None:
        new, stored = pair.new_features, pair.stored_features
        if pair.same_text or pair.either_short or not new.words or not stored.words \
                or new.automated or stored.automated or new.notifier or stored.notifier:
            return None
        if not new.sender or new.sender != stored.sender or not new.subject \
                or new.subject != stored.subject or set(new.thread) != set(stored.thread) \
                or new.quoted != stored.quoted:
            return None
        found = pair.word_changes
        if found is None or changed_fact(pair) is not None \
                or any(key & DIGIT_WORD for key in found[1]) \
                or identifier_conflict(pair) is not None:
            return None     # a number changed too is another message, not its wording
        edits = found[0]
        longer = max(len(new.words), len(stored.words))
        context = "same sender, same subject" + (", same thread" if new.thread else "") \
            + (", same quoted text" if new.quoted else "")
        return Judgement(NEAR_DUPLICATE, self.name, "words", 1.0 - edits / longer,
                         f"the same short text with {edits} of its {longer} words "
                         f"changed, the rest in order ({context})")
