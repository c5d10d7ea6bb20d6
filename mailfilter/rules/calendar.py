"""``calendar``: two invitations are one message only for the same event in the same
version; another UID, a higher SEQUENCE, another method or another attendee's answer is
news."""

from __future__ import annotations

from mailfilter.names import DUPLICATE
from mailfilter.rules.pair import Judgement, Pair, RuleName


class CalendarRule:
    name = RuleName.CALENDAR
    description = ("two invitations are one message only for the same event in the same "
                   "version: UID, SEQUENCE, start, method, the answering attendee "
                   "(duplicate, or unique)")

    def judge(self, pair: Pair) -> Judgement | None:
        new, stored = pair.new_features.calendar, pair.stored_features.calendar
        if new is None or stored is None:
            return None
        if new.key == stored.key:
            return Judgement(DUPLICATE, self.name, "calendar", 1.0,
                             f"same event, same version ({new.method}, SEQUENCE "
                             f"{new.sequence})")
        if new.uid != stored.uid:
            note = "calendar: another event (UID differs)"
        elif new.method != stored.method:
            note = f"calendar: {new.method} after {stored.method} of the event"
        elif new.sequence > stored.sequence:
            note = (f"calendar: update of the event (SEQUENCE {new.sequence} after "
                    f"{stored.sequence})")
        elif new.method in ("REPLY", "COUNTER"):
            note = "calendar: another answer to the event"
        else:
            note = "calendar: the event changed (times, place or status)"
        return Judgement(rule=self.name, note=note)
