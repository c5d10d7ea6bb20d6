"""The planner's whole table: verdict × action × partial or full duplicate × front end
(mailfilter/decision.py; docs/design.md, "Deciding").  The same partial-duplicate rows run
through both daemons in test_milter_unit.py and test_smtpd.py (``PARTIAL_ROWS``)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from helpers import make_message, paragraph_text

from mailfilter.config import FingerprintSettings, MilterSettings, SmtpdSettings
from mailfilter.decision import (
    MILTER,
    PARTIAL_DUPLICATE_TAGGED,
    PIPE,
    PIPE_CHECK,
    SEEN_RECIPIENTS_DROPPED,
    SMTPD,
    UNCHECKED_TEXT,
    Disposition,
    FrontEnd,
    Refusal,
    plan,
    plan_error,
)
from mailfilter.detector import Verdict
from mailfilter.engine import analyse
from mailfilter.headers import verdict_value
from mailfilter.names import MILTER_ACTIONS, SMTPD_ACTIONS, Action, Kind
from mailfilter.store import Record
from mailfilter.values import replace

BOB, CAROL = "<Bob@Example.NET>", "<carol@example.net>"   # as the MTA spells them
FINGERPRINT = analyse(make_message(paragraph_text(1)), FingerprintSettings()).fingerprint
MATCH = Record(histogram=bytes(36), histogram_sum=0, histogram_chars=0, sketch=(),
               shingle_count=0, word_count=0, digest=bytes(16), message_id_key=None,
               message_id="<first@example.org>", chunks=(), recipients=(), first_seen=1,
               last_seen=1, seen=1, doc_id=7)


def verdict(kind: Kind, seen: tuple[str, ...] = (), *, record_allowed: bool = True
            ) -> Verdict:
    """A verdict for bob and carol; ``seen``: who had it (as the detector spells them)."""
    duplicate = kind is not Kind.UNIQUE
    return Verdict(kind, FINGERPRINT, "<again@example.org>",
                   score=1.0 if duplicate else None, measure="digest" if duplicate else "",
                   match=MATCH if duplicate else None,
                   recipients=("bob@example.net", "carol@example.net"), recipients_seen=seen,
                   exempted_by=None if record_allowed else "an allow rule")


FULL = ("bob@example.net", "carol@example.net")
PARTIAL = ("bob@example.net",)


def settings_for(front_end: FrontEnd, unique: str, duplicate: str
                 ) -> MilterSettings | SmtpdSettings | None:
    if front_end is PIPE:
        return None
    section = MilterSettings() if front_end is MILTER else SmtpdSettings()
    section.actions.unique = unique
    section.actions.duplicate = section.actions.near_duplicate = duplicate
    return section


def whole(action: str, header: str, reject: str = "Duplicate message refused",
          reason: str = "dupfilter: duplicate", record: bool = True) -> Disposition:
    """The disposition of one action for the whole message (the spec, written out)."""
    if action in (Action.TAG, Action.DROP_RECIPIENTS):
        return Disposition(Action.TAG, header, record=record)
    if action == Action.ACCEPT:
        return Disposition(Action.ACCEPT, None, record=record)
    if action == Action.QUARANTINE:
        return Disposition(Action.QUARANTINE, header, record=record,
                           quarantine=f"{reason} ({header})")
    if action == Action.REJECT:
        return Disposition(Action.REJECT, refusal=Refusal(550, "5.7.1", reject))
    if action == Action.TEMPFAIL:
        return Disposition(Action.TEMPFAIL, refusal=Refusal(451, "4.7.1", reject))
    return Disposition(Action.DISCARD)


def expected(kind: Kind, action: str, unique: str, partial: bool) -> Disposition:
    """The decided table (docs/design.md), restated independently of decision.py."""
    header = verdict_value(verdict(kind))
    if kind is Kind.UNIQUE:
        return whole(action, header)
    if not partial:
        return whole(Action.DISCARD if action == Action.DROP_RECIPIENTS else action, header)
    # Bob had it, carol did not: the one header they share must not say "duplicate".
    header = f"partial; rcpts_seen=1/2; verdict={header}"
    if action in (Action.REJECT, Action.TEMPFAIL):
        return Disposition(Action.TAG, header, note=PARTIAL_DUPLICATE_TAGGED, record=True)
    if action in (Action.DISCARD, Action.DROP_RECIPIENTS):
        fresh = whole(unique, "unique")
        if fresh.action in (Action.REJECT, Action.TEMPFAIL, Action.DISCARD):
            return fresh
        return Disposition(Action.DROP_RECIPIENTS, fresh.header, keep=(CAROL,), drop=(BOB,),
                           record=True, quarantine=fresh.quarantine,
                           note=SEEN_RECIPIENTS_DROPPED if action == Action.DISCARD else None)
    return whole(action, header)


CASES = [(front_end, kind, action, unique, partial)
         for front_end in (MILTER, SMTPD, PIPE)
         for kind in Kind
         for action, unique in itertools.product(front_end.actions, repeat=2)
         for partial in (False, True)]


@pytest.mark.parametrize(("front_end", "kind", "action", "unique", "partial"), CASES,
                         ids=[f"{f.name}-{k}-{a}-unique={u}-{'partial' if p else 'full'}"
                              for f, k, a, u, p in CASES])
def test_the_whole_table(front_end: FrontEnd, kind: Kind, action: str, unique: str,
                         partial: bool) -> None:
    settings = settings_for(front_end, unique if kind is not Kind.UNIQUE else action,
                            action)
    seen = () if kind is Kind.UNIQUE else PARTIAL if partial else FULL
    got = plan(verdict(kind, seen), settings, (BOB, CAROL), front_end)
    want = expected(kind, action, unique if kind is not Kind.UNIQUE else action, partial)
    if front_end is PIPE:       # the pipe filter passes every checked message on: exit 0
        want = replace(want, exit_status=0)
    assert got == want


def test_the_pipe_filter_always_tags() -> None:
    for kind in Kind:
        got = plan(verdict(kind, FULL), None, (), PIPE)
        assert got.action is Action.TAG and got.header == verdict_value(verdict(kind))
        assert got.exit_status == 0 and got.record


def test_the_pipe_filter_as_a_condition_answers_by_its_exit_status() -> None:
    """dupfilter --check: true (0) for a duplicate or near-duplicate, false (1) for a new
    message and for one it could not check; it writes nothing, and remembers what the
    tagging filter would."""
    for kind in Kind:
        got = plan(verdict(kind, FULL), None, (), PIPE_CHECK)
        assert got.exit_status == (1 if kind is Kind.UNIQUE else 0) and got.record
    assert not plan(verdict(Kind.UNIQUE, record_allowed=False), None, (), PIPE_CHECK).record
    assert plan_error("tempfail", PIPE_CHECK).exit_status == 1
    assert plan_error("tempfail", PIPE).exit_status == 0
    assert plan_error("tempfail", PIPE).action is Action.ACCEPT


@pytest.mark.parametrize("front_end", [MILTER, SMTPD])
def test_an_action_the_front_end_cannot_carry_out_is_refused(front_end: FrontEnd) -> None:
    for action in set(Action) - set(front_end.actions):
        settings = settings_for(front_end, "tag", action)
        with pytest.raises(ValueError, match="cannot"):
            plan(verdict(Kind.DUPLICATE, FULL), settings, (BOB, CAROL), front_end)


def test_the_settings_name_exactly_these_actions() -> None:
    assert set(MILTER.actions) == set(MILTER_ACTIONS) == set(Action) - {Action.REFUSED}
    assert set(SMTPD.actions) == set(SMTPD_ACTIONS) == {"accept", "tag", "reject", "discard"}


def test_an_allow_rule_that_forbids_recording_is_obeyed_whatever_the_action() -> None:
    exempt = verdict(Kind.DUPLICATE, PARTIAL, record_allowed=False)
    for action in ("tag", "accept", "quarantine", "reject", "discard", "drop-recipients"):
        assert not plan(exempt, settings_for(MILTER, "tag", action), (BOB, CAROL),
                        MILTER).record


def test_recipients_are_compared_by_recipient_key_and_given_back_as_spelled() -> None:
    """The MTA's ``<Bob@Example.NET>`` is the detector's ``bob@example.net``; the same
    address twice, or in two spellings, is one recipient (a full duplicate)."""
    got = plan(verdict(Kind.DUPLICATE, PARTIAL), settings_for(MILTER, "tag", "discard"),
               (BOB, CAROL), MILTER)
    assert (got.drop, got.keep) == ((BOB,), (CAROL,))
    twice = verdict(Kind.DUPLICATE, ("bob@example.net",))
    twice = replace(twice, recipients=("bob@example.net", "BOB@example.net"))
    got = plan(twice, settings_for(SMTPD, "tag", "discard"), ("bob@example.net",
                                                               "BOB@example.net"), SMTPD)
    assert got.action is Action.DISCARD


def test_reply_and_reason_texts_are_one_line() -> None:
    settings = MilterSettings(reject_message="Seen\r\nthat", quarantine_reason="held\tnow")
    settings.actions.duplicate = "reject"
    assert plan(verdict(Kind.DUPLICATE, FULL), settings, (BOB,), MILTER).refusal == \
        Refusal(550, "5.7.1", "Seen  that")
    settings.actions.duplicate = "quarantine"
    reason = plan(verdict(Kind.DUPLICATE, FULL), settings, (BOB,), MILTER).quarantine
    assert reason is not None and reason.startswith("held now (duplicate; score=1.00")


def test_on_error_is_accept_or_a_451_never_a_refusal_or_a_discard() -> None:
    assert plan_error("accept") == Disposition(Action.ACCEPT)
    assert plan_error("tempfail") == Disposition(
        Action.TEMPFAIL, refusal=Refusal(451, "4.3.0", UNCHECKED_TEXT))
    assert not plan_error("accept").record and plan_error("accept").delivered


# The partial-duplicate rows, run through both daemons: bob had the duplicate, carol did
# not.  (duplicate action, unique action) → what the log line says, carol's header (None:
# no header), whether carol and bob get a copy, the reply code when it is refused.


@dataclass(frozen=True)
class PartialRow:
    duplicate: str
    unique: str
    action: str                 # the log line's action=
    note: str | None
    carol: bool                 # carol gets a copy
    bob: bool                   # bob gets a copy
    header: str | None          # carol's X-Dupfilter (prefix); None: no header
    reply: int = 250
    quarantined: bool = False

    @property
    def id(self) -> str:
        return f"duplicate={self.duplicate}-unique={self.unique}"


PARTIAL_ROWS = [
    PartialRow("discard", "tag", "drop-recipients", SEEN_RECIPIENTS_DROPPED, True, False,
               "unique"),
    PartialRow("discard", "accept", "drop-recipients", SEEN_RECIPIENTS_DROPPED, True, False,
               None),
    PartialRow("discard", "quarantine", "drop-recipients", SEEN_RECIPIENTS_DROPPED, True,
               False, "unique", quarantined=True),
    PartialRow("discard", "discard", "discard", None, False, False, None),
    PartialRow("discard", "reject", "reject", None, False, False, None, reply=550),
    PartialRow("discard", "tempfail", "tempfail", None, False, False, None, reply=451),
    PartialRow("drop-recipients", "tag", "drop-recipients", None, True, False, "unique"),
    PartialRow("reject", "tag", "tag", PARTIAL_DUPLICATE_TAGGED, True, True, "partial"),
    PartialRow("reject", "discard", "tag", PARTIAL_DUPLICATE_TAGGED, True, True, "partial"),
    PartialRow("tempfail", "tag", "tag", PARTIAL_DUPLICATE_TAGGED, True, True, "partial"),
    PartialRow("tag", "tag", "tag", None, True, True, "partial"),
]


@pytest.mark.parametrize("row", PARTIAL_ROWS, ids=lambda row: row.id)
def test_partial_rows_agree_with_the_table(row: PartialRow) -> None:
    got = plan(verdict(Kind.DUPLICATE, PARTIAL), settings_for(MILTER, row.unique,
                                                              row.duplicate),
               (BOB, CAROL), MILTER)
    assert (got.action, got.note) == (row.action, row.note)
    assert got.delivered == row.carol
    assert (got.delivered and BOB not in got.drop) == row.bob
    assert (got.header or "").startswith(row.header or "") and \
        (got.header is None) == (row.header is None)
    assert (got.quarantine is not None) == row.quarantined
    assert (got.refusal.code if got.refusal else 250) == row.reply


@pytest.mark.parametrize("front_end", [MILTER, SMTPD, PIPE], ids=lambda f: f.name)
def test_a_recipient_who_never_had_it_gets_no_header_the_recipes_file_away(
        front_end: FrontEnd) -> None:
    """Bob had the message, carol did not, under the default ``tag``: the one header both
    copies carry says ``partial``, which neither the procmail/maildrop recipes
    (``^X-Dupfilter: (near-)?duplicate``) nor the Sieve one (``:matches ["duplicate*",
    "near-duplicate*"]``) file away.  Before, it said ``duplicate; …`` and carol's first copy
    went to the duplicates folder (issue: Co-recipients)."""
    import re
    for kind in (Kind.DUPLICATE, Kind.NEAR_DUPLICATE):
        got = plan(verdict(kind, PARTIAL), settings_for(front_end, "tag", "tag"),
                   (BOB, CAROL), front_end)
        assert got.action is Action.TAG and got.delivered and got.header is not None
        assert got.header.startswith("partial; rcpts_seen=1/2; verdict=" + kind.value)
        assert not re.match(r"(near-)?duplicate", got.header)
        # Every recipient had it: the header says so, as before.
        full = plan(verdict(kind, FULL), settings_for(front_end, "tag", "tag"),
                    (BOB, CAROL), front_end)
        assert full.header == verdict_value(verdict(kind))
