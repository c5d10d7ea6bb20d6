"""``edited-copy``: a short message sent again by its sender under the same subject, in the
same thread and over the same quoted text, with a few words changed (a resend with its
wording corrected).  Five-word shingles cannot see such a copy (three edits in twenty
words can leave no shingle in common), so the two texts are compared word by word (their
``Features.words``): at most one word in five changed and the rest in the same order.  A
changed number, or a negation added or taken away ("is broken" / "is not broken", "can" /
"can't"), is a changed fact, never wording: those pairs stay two messages, as do a
program's notices (their next event changes a word) and texts under ``min_words``."""

from __future__ import annotations

from mailfilter.features import DIGIT_WORD, WORDS_MAX, word_key
from mailfilter.names import NEAR_DUPLICATE
from mailfilter.rules.pair import Judgement, Pair, RuleName, identifier_conflict

# Words whose presence turns a statement round ("don't" is read as "don" + "t").
_NEGATIONS = frozenset(word_key(word) for word in (
    "not", "no", "never", "t", "cannot", "nor", "neither", "none", "nothing", "nobody",
    "without", "nicht", "kein", "keine", "nie", "pas", "jamais", "nunca", "niet", "geen",
    "non", "nein"))


def changed_words(new: tuple[int, ...], stored: tuple[int, ...]
                  ) -> tuple[int, list[int]] | None:
    """The words of either text outside their longest common subsequence (a word
    replaced counts once on each side), as (edits, those words' keys); None when there
    are more than one in five of the longer text's words (at least 2 allowed).  Both
    texts are at most WORDS_MAX words: the table is bounded."""
    longer = max(len(new), len(stored))
    allowed = max(2, longer // 5)
    if abs(len(new) - len(stored)) > allowed or longer > WORDS_MAX:
        return None
    columns = len(stored) + 1
    table = [[0] * columns]
    for word in new:
        above = table[-1]
        row = [0]
        for j, other in enumerate(stored):
            row.append(above[j] + 1 if word == other else max(above[j + 1], row[j]))
        table.append(row)
    common = table[-1][-1]
    if longer - common > allowed:
        return None
    changed: list[int] = []
    i, j = len(new), len(stored)
    while i and j:
        if new[i - 1] == stored[j - 1]:
            i, j = i - 1, j - 1
        elif table[i - 1][j] >= table[i][j - 1]:
            i -= 1
            changed.append(new[i])
        else:
            j -= 1
            changed.append(stored[j])
    changed += new[:i] + stored[:j]
    return longer - common, changed


class EditedCopyRule:
    name = RuleName.EDITED_COPY
    description = ("a short message (min_words to 40 words) sent again by the same sender "
                   "under the same subject, thread and quoted text with at most one word "
                   "in five changed, no number and no negation among them (near-duplicate)")

    def judge(self, pair: Pair) -> Judgement | None:
        new, stored = pair.new_features, pair.stored_features
        if pair.same_text or pair.either_short or not new.words or not stored.words \
                or new.automated or stored.automated or new.notifier or stored.notifier:
            return None
        if not new.sender or new.sender != stored.sender or not new.subject \
                or new.subject != stored.subject or set(new.thread) != set(stored.thread) \
                or new.quoted != stored.quoted:
            return None
        found = changed_words(new.words, stored.words)
        if found is None:
            return None
        edits, changed = found
        if any(key & DIGIT_WORD or key in _NEGATIONS for key in changed) \
                or identifier_conflict(pair) is not None:
            return None
        longer = max(len(new.words), len(stored.words))
        context = "same sender, same subject" + (", same thread" if new.thread else "") \
            + (", same quoted text" if new.quoted else "")
        return Judgement(NEAR_DUPLICATE, self.name, "words", 1.0 - edits / longer,
                         f"the same short text with {edits} of its {longer} words "
                         f"changed, the rest in order ({context})")
