"""The one place that decides what happens to a message once it has a verdict.

Every front end asks :func:`plan` (or :func:`plan_error` when there is no verdict) for a
:class:`Disposition` and only translates it into its protocol: pymilter calls (the milter),
SMTP replies and delivery to the next hop (dupfilter-smtpd), stdout and the exit status
(the pipe filter).  Nothing here speaks a protocol or touches the store.

A duplicate that only some recipients had (per-recipient scope) is narrowed the same way
for every front end (docs/design.md, "Deciding"):

* ``discard`` and ``drop-recipients``: those who had it are dropped; for the others it is a
  new message and it goes to them as the ``unique`` action would send it (``accept``,
  ``tag`` or ``quarantine``; a ``unique`` action that refuses or discards new mail does so
  for the whole message);
* ``reject`` and ``tempfail``: one reply at the end of DATA cannot refuse only some
  recipients (and a deferred message would be deferred again at every retry), so it is
  tagged for everyone with the duplicate's header.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mailfilter.config import ActionSettings, MilterSettings, SmtpdSettings
from mailfilter.headers import partial_value, verdict_value
from mailfilter.names import MILTER_ACTIONS, SMTPD_ACTIONS, Action, Kind
from mailfilter.store import recipient_key
from mailfilter.values import Value, init, replace

if TYPE_CHECKING:
    from mailfilter.detector import Verdict

# The log line's note when a duplicate's action was narrowed to some recipients.
SEEN_RECIPIENTS_DROPPED = "discard-seen-recipients"
PARTIAL_DUPLICATE_TAGGED = "partial-duplicate-tagged"
# The reply to a message that could not be checked (on_error = "tempfail").
UNCHECKED_TEXT = "dupfilter could not check the message, try again later"
# dupfilter-smtpd's 250 to a discarded message.
DISCARDED_TEXT = "Ok: discarded by dupfilter"

_REFUSING = frozenset((Action.REJECT, Action.TEMPFAIL, Action.DISCARD))
_NARROWED = frozenset((Action.REJECT, Action.TEMPFAIL, Action.DISCARD,
                       Action.DROP_RECIPIENTS))


class FrontEnd(Value):
    """What a front end can carry out."""

    __slots__ = ("name", "actions")

    def __init__(self,
                 name: str,                      # "milter", "smtpd", "pipe" (logs and metrics)
                 actions: tuple[str, ...],       # the actions its settings may name
                 ) -> None:
        init(self, name=name, actions=actions)


MILTER = FrontEnd("milter", MILTER_ACTIONS)
SMTPD = FrontEnd("smtpd", SMTPD_ACTIONS)
PIPE = FrontEnd("pipe", (Action.TAG.value,))              # dupfilter --tag
PIPE_CHECK = FrontEnd("pipe-check", (Action.TAG.value,))  # dupfilter --check: writes nothing
# The pipe filter's exit statuses: a condition (--check) is true (0) for a duplicate.
EXIT_PASSED, EXIT_DUPLICATE, EXIT_NOT_DUPLICATE = 0, 0, 1


class Refusal(Value):
    """The SMTP reply to a refused or deferred message."""

    __slots__ = ("code", "status", "text")

    def __init__(self,
                 code: int,          # 550 or 451
                 status: str,        # enhanced status code, "5.7.1"
                 text: str,          # one line, no control characters
                 ) -> None:
        init(self, code=code, status=status, text=text)


class Disposition(Value):
    """What to do with one message, for a front end to translate into its protocol.

    When the message goes on (``delivered``), every incoming ``X-Dupfilter:`` is removed
    and ``header`` (when set) is added; the recipients in ``drop`` lose their copy.
    """

    __slots__ = ("action", "header", "keep", "drop", "note", "record", "refusal",
                 "quarantine", "exit_status")

    def __init__(
        self,
        action: Action,
        header: str | None = None,           # the X-Dupfilter value to add (no CR/LF)
        keep: tuple[str, ...] = (),          # recipients it goes to, when some are dropped
        drop: tuple[str, ...] = (),          # recipients who lose their copy
        note: str | None = None,             # why the action was narrowed (the log's note=)
        record: bool = False,                # remember it once it has gone on
        refusal: Refusal | None = None,      # reject, tempfail (and on_error tempfail)
        quarantine: str | None = None,       # hold it, with this reason (milter)
        exit_status: int | None = None,      # the pipe filter's exit status
    ) -> None:
        init(self, action=action, header=header, keep=keep, drop=drop, note=note,
             record=record, refusal=refusal, quarantine=quarantine, exit_status=exit_status)

    @property
    def delivered(self) -> bool:
        """The message goes on (to every recipient not in ``drop``)."""
        return self.action not in _REFUSING


FrontEndSettings = MilterSettings | SmtpdSettings


def plan(verdict: Verdict, settings: FrontEndSettings | None, recipients: Sequence[str],
         front_end: FrontEnd) -> Disposition:
    """The disposition of a checked message.

    ``settings``: the front end's section (its actions and texts, read afresh for each
    message since SIGHUP may change them); None for the pipe filter, which tags.
    ``recipients``: the envelope recipients as the front end spells them (``<a@b>`` or
    ``a@b``); ``keep`` and ``drop`` are given back in that spelling.  Addresses are
    compared by :func:`~mailfilter.store.recipient_key` (case and brackets do not count).
    """
    if front_end is PIPE_CHECK:
        return Disposition(Action.TAG, record=verdict.record_allowed,
                           exit_status=EXIT_DUPLICATE if verdict.is_duplicate
                           else EXIT_NOT_DUPLICATE)
    actions = settings.actions if settings is not None else ActionSettings()
    kind = verdict.kind
    action = Action(actions.for_verdict(kind))
    if action not in front_end.actions:
        raise ValueError(f"{front_end.name} cannot {action} (settings: {kind.key})")
    header = verdict_value(verdict)
    record = verdict.record_allowed
    seen = {recipient_key(address) for address in verdict.recipients_seen}
    keep = tuple(r for r in recipients if recipient_key(r) not in seen)
    partial = verdict.is_duplicate and bool(keep) and not verdict.all_recipients_seen
    if partial:
        # One header serves every recipient of the copy the MTA delivers: for those who
        # never had it, it must not say "duplicate" (docs/postfix.md, "Co-recipients").
        header = partial_value(verdict, len(recipients) - len(keep), len(recipients))
    if verdict.is_duplicate and action in _NARROWED:
        if partial:
            if action in (Action.REJECT, Action.TEMPFAIL):
                return Disposition(Action.TAG, header, note=PARTIAL_DUPLICATE_TAGGED,
                                   record=record)
            # New to the recipients left: the unique action's disposition, for them.
            fresh = _dispose(Action(actions.for_verdict(Kind.UNIQUE)), Kind.UNIQUE.value,
                             settings, record)
            if not fresh.delivered:
                return fresh
            drop = tuple(r for r in recipients if recipient_key(r) in seen)
            return replace(fresh, action=Action.DROP_RECIPIENTS if drop else fresh.action,
                           keep=keep, drop=drop,
                           note=SEEN_RECIPIENTS_DROPPED if action is Action.DISCARD
                           else None)
        if action is Action.DROP_RECIPIENTS:      # every recipient had it
            action = Action.DISCARD
    disposition = _dispose(action, header, settings, record)
    return replace(disposition, exit_status=EXIT_PASSED) if front_end is PIPE else disposition


def _dispose(action: Action, header: str, settings: FrontEndSettings | None,
             record: bool) -> Disposition:
    """One action for the whole message, ``header`` being its X-Dupfilter value."""
    if action in (Action.TAG, Action.DROP_RECIPIENTS):     # nobody to drop: tagged
        return Disposition(Action.TAG, header, record=record)
    if action is Action.ACCEPT:
        return Disposition(action, None, record=record)
    if action is Action.DISCARD:
        return Disposition(action)
    assert settings is not None, f"{action} needs the front end's settings"
    if action is Action.REJECT:
        return Disposition(action, refusal=Refusal(550, "5.7.1",
                                                   _one_line(settings.reject_message)))
    if action is Action.TEMPFAIL:
        return Disposition(action, refusal=Refusal(451, "4.7.1",
                                                   _one_line(settings.reject_message)))
    if action is Action.QUARANTINE and isinstance(settings, MilterSettings):
        return Disposition(action, header, record=record,
                           quarantine=_one_line(f"{settings.quarantine_reason} ({header})"))
    raise ValueError(f"no disposition for action {action!r}")


def plan_error(on_error: str, front_end: FrontEnd | None = None) -> Disposition:
    """The disposition of a message that could not be checked (``on_error``): passed on
    without our header (an incoming one removed), or deferred with a 451.  Never
    rejected, never discarded, never recorded.  The pipe filter passes it on (exit 0), or,
    as a condition, answers "not a duplicate" (exit 1)."""
    if front_end is PIPE_CHECK:
        return Disposition(Action.ACCEPT, exit_status=EXIT_NOT_DUPLICATE)
    if front_end is PIPE:
        return Disposition(Action.ACCEPT, exit_status=EXIT_PASSED)
    if Action(on_error) is Action.TEMPFAIL:
        return Disposition(Action.TEMPFAIL, refusal=Refusal(451, "4.3.0", UNCHECKED_TEXT))
    return Disposition(Action.ACCEPT)


def _one_line(text: str) -> str:
    """Reply or reason text on one line: control characters become spaces."""
    return "".join(" " if ord(c) < 32 or ord(c) == 127 else c for c in text)
