"""The words every layer shares: verdict kinds and actions, as string enums.

A leaf module (it imports nothing of mailfilter), so that the settings, the detector, the
stores and the front ends all spell a verdict or an action the same way without an import
cycle.  They are :class:`enum.StrEnum`: ``Kind.UNIQUE == "unique"``, and a log line, a
header or a JSON document shows the plain word.
"""

from __future__ import annotations

from enum import StrEnum


class Kind(StrEnum):
    """What the detector says a message is (a Verdict's ``verdict``)."""

    UNIQUE = "unique"
    DUPLICATE = "duplicate"
    NEAR_DUPLICATE = "near-duplicate"

    @property
    def key(self) -> str:
        """The kind as a settings key (``[milter.actions] near_duplicate``)."""
        return self.value.replace("-", "_")


# The detector's names for them.
UNIQUE, DUPLICATE, NEAR_DUPLICATE = Kind.UNIQUE, Kind.DUPLICATE, Kind.NEAR_DUPLICATE


class Action(StrEnum):
    """What a front end does with a message: an action the settings may name, or what a
    log line's ``action=`` says happened."""

    ACCEPT = "accept"                   # passed on without our header
    TAG = "tag"                         # passed on with our header
    REJECT = "reject"                   # 550 at the end of DATA
    TEMPFAIL = "tempfail"               # 451 at the end of DATA
    DISCARD = "discard"                 # 250, then delivered nowhere
    QUARANTINE = "quarantine"           # held by the MTA (milter only)
    DROP_RECIPIENTS = "drop-recipients"  # those who had it lose their copy, others get it
    REFUSED = "refused"                 # (log only) refused before a verdict: too large


# What the settings may name (plain strings, so that a message listing them reads well).
VERDICTS: tuple[str, ...] = tuple(kind.value for kind in Kind)
MILTER_ACTIONS: tuple[str, ...] = tuple(action.value for action in (
    Action.ACCEPT, Action.TAG, Action.REJECT, Action.TEMPFAIL, Action.DISCARD,
    Action.QUARANTINE, Action.DROP_RECIPIENTS))
SMTPD_ACTIONS: tuple[str, ...] = tuple(action.value for action in (
    Action.ACCEPT, Action.TAG, Action.REJECT, Action.DISCARD))
ON_ERROR: tuple[str, ...] = (Action.ACCEPT.value, Action.TEMPFAIL.value)
