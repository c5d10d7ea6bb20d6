"""The pair rules: is a stored message the same message as the new one, or another one that
looks alike?

Text measures (resemblance, the histogram) say how alike two bodies are; they cannot say
whether the second is the first *again*.  Different messages look alike all the time:
invitations from one organiser, notices from one template, cron reports, one-line replies,
messages under one company's disclaimer.  Each rule is a small unit (one module here) that
answers one such question about a :class:`~mailfilter.rules.pair.Pair`, or passes; the
detector runs :data:`RULES` in order and the first that decides names itself in the
evidence (as Mailman's rules do), so that ``explain`` can say why.  A new rule is one new
module with a ``judge`` method, its place in :data:`RULES`, and its test
(tests/test_rule_units.py); docs/design.md's rule table is :func:`rule_table`.
"""

from __future__ import annotations

from mailfilter.rules.attached_message import AttachedMessageRule
from mailfilter.rules.attachments import AttachmentsRule
from mailfilter.rules.calendar import CalendarRule
from mailfilter.rules.digest import DigestRule
from mailfilter.rules.edited_copy import EditedCopyRule
from mailfilter.rules.facts import FactsRule
from mailfilter.rules.histogram import HistogramRule
from mailfilter.rules.identifiers import IdentifiersRule
from mailfilter.rules.message_id import MessageIdRule
from mailfilter.rules.notifier import NotifierRule
from mailfilter.rules.pair import Judgement, Pair, Rule, RuleName
from mailfilter.rules.reply import ReplyRule
from mailfilter.rules.resend import ResendRule
from mailfilter.rules.resend_note import ResendNoteRule
from mailfilter.rules.resent_original import ResentOriginalRule
from mailfilter.rules.shingles import ShinglesRule
from mailfilter.rules.short_text import ShortTextRule
from mailfilter.rules.subject import SubjectRule, why_not

__all__ = ["RULES", "Judgement", "Pair", "Rule", "RuleName", "describe", "judge",
           "rule_table"]

# In the order they run: the first rule that answers decides.
RULES: tuple[Rule, ...] = (
    MessageIdRule(),
    AttachedMessageRule(),
    CalendarRule(),
    ResendNoteRule(),
    ReplyRule(),
    NotifierRule(),
    AttachmentsRule(),
    ResentOriginalRule(),
    IdentifiersRule(),
    FactsRule(),
    DigestRule(),
    ResendRule(),
    ShortTextRule(),
    ShinglesRule(),
    EditedCopyRule(),
    HistogramRule(),
    SubjectRule(),
)
_BY_NAME = {rule.name: rule for rule in RULES}


def judge(pair: Pair, rules: tuple[Rule, ...] = RULES) -> Judgement:
    """The first judgement of ``rules`` on ``pair``; unique, with why not, when none
    answers (nothing alike enough)."""
    for rule in rules:
        judgement = rule.judge(pair)
        if judgement is not None:
            return judgement
    return Judgement(note=why_not(pair))


def describe(name: RuleName | str | None) -> str:
    """What a rule decides, in one line ("" for no rule or an unknown name)."""
    rule = _BY_NAME.get(name) if name else None     # a RuleName is its str
    return rule.description if rule is not None else ""


def rule_table() -> str:
    """The rules in order as a Markdown table: docs/design.md carries this (a test checks
    that it is current)."""
    lines = ["| order | rule | decides |", "| ---: | --- | --- |"]
    lines += [f"| {number} | `{rule.name}` | {rule.description} |"
              for number, rule in enumerate(RULES, 1)]
    return "\n".join(lines)
