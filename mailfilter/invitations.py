"""Calendar invitations: which event a ``text/calendar`` part is about, and which version.

Invitations from one organiser share nearly all their text (Teams, Zoom and Meet put pages
of the same boilerplate in every one), so text measures call them duplicates of each other.
RFC 5545 says what tells them apart: an event is its UID (and RECURRENCE-ID for one
occurrence of a series); a higher SEQUENCE is a new version of it; METHOD says whether it
is an invitation, a cancellation or an attendee's answer.  The same UID, SEQUENCE and times
sent again is the same invitation again.

Parsed with the ``icalendar`` package, imported only when a message has a calendar part;
at most the first 50 events and 256 KB of a part (icalendar takes about 2 µs a byte: a part
of 20,000 events would take seconds), cut where an event begins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from mailfilter.features import CALENDAR_TYPES, CalendarSummary, is_calendar, key64
from mailfilter.text import Pattern

__all__ = ["CALENDAR_TYPES", "calendar_summary", "is_calendar"]
# Properties that make one version of an event: a change in any of them is news to the
# recipient even when a sloppy sender did not raise SEQUENCE.  DTSTAMP is left out: it is
# the time the copy was made, new in every resend.
_EVENT_PROPERTIES = ("UID", "RECURRENCE-ID", "SEQUENCE", "DTSTART", "DTEND", "DURATION",
                     "RRULE", "EXDATE", "RDATE", "STATUS", "SUMMARY", "LOCATION")
EVENTS_MAX = 50
CALENDAR_BYTES_MAX = 256 * 1024
_COMPONENT_START = Pattern(rb"^BEGIN:(?:VEVENT|VTODO|VJOURNAL)\b", re.MULTILINE | re.IGNORECASE)
# In an answer (REPLY, COUNTER…), who answered and how.
_ANSWER_METHODS = ("REPLY", "COUNTER", "DECLINECOUNTER", "REFRESH")


def _text(value: object) -> str:
    """A property value as iCalendar text (lists joined), whatever its type."""
    if value is None:
        return ""
    if isinstance(value, list):
        return ",".join(_text(item) for item in value)
    to_ical = getattr(value, "to_ical", None)
    if to_ical is not None:
        try:
            raw = to_ical()
            return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        except Exception:  # noqa: BLE001 - a value icalendar cannot render: use its text
            pass
    return str(value)


def _attendees(event: object) -> list[str]:
    values = event.get("ATTENDEE")  # type: ignore[attr-defined]
    if values is None:
        return []
    if not isinstance(values, list):
        values = [values]
    found = []
    for value in values:
        params = getattr(value, "params", {}) or {}
        found.append(f"{str(value).lower()}|{params.get('PARTSTAT', '')}".upper())
    return sorted(found)


def _bounded(data: bytes, defects: list[str]) -> bytes:
    """``data`` cut before its 51st event, or before the last event that begins in its
    first 256 KB, when it is longer (the calendar closed again after the cut)."""
    window = min(len(data), CALENDAR_BYTES_MAX)
    starts = []
    for found in _COMPONENT_START.get().finditer(data, 0, window):
        starts.append(found.start())
        if len(starts) > EVENTS_MAX:
            break
    if len(starts) > EVENTS_MAX:
        cut = starts[EVENTS_MAX]
    elif len(data) > CALENDAR_BYTES_MAX:
        cut = starts[-1] if starts else CALENDAR_BYTES_MAX
    else:
        return data
    defects.append(f"calendar part cut to its first {EVENTS_MAX} events or "
                   f"{CALENDAR_BYTES_MAX // 1024} KB")
    return data[:cut] + b"END:VCALENDAR\r\n"


def calendar_summary(parts: Iterable[bytes], defects: list[str]) -> CalendarSummary | None:
    """The events of a message's calendar parts, or None when it has none that parse."""
    events: list[str] = []
    first: tuple[str, int] | None = None
    method = ""
    for data in parts:
        data = _bounded(data, defects)
        try:
            import icalendar  # only messages with a calendar part pay for the import

            calendar = icalendar.Calendar.from_ical(data)
        except Exception as error:  # noqa: BLE001 - broken iCalendar: a defect, not a crash
            defects.append(f"calendar part does not parse: {type(error).__name__}")
            continue
        method = method or _text(calendar.get("METHOD")).upper() or "PUBLISH"
        for event in calendar.walk():
            if event.name not in ("VEVENT", "VTODO", "VJOURNAL"):
                continue
            values = [f"{name}={_text(event.get(name))}" for name in _EVENT_PROPERTIES]
            if method in _ANSWER_METHODS:
                values.extend(_attendees(event))
            events.append("\x1f".join([event.name, *values]))
            if first is None:
                try:
                    sequence = int(_text(event.get("SEQUENCE")) or 0)
                except ValueError:
                    sequence = 0
                first = (_text(event.get("UID")), max(0, sequence))
    if first is None:
        return None
    return CalendarSummary(key=key64("\x1e".join([method, *sorted(events)])),
                           uid=key64(first[0]), sequence=first[1], method=method)
