"""Allow rules: mail that legitimately repeats (cron reports, monitoring alerts, newsletters
resent on purpose) is not checked, or not recorded, when a rule matches.

A rule names a field, a regular expression searched in it (case-insensitive) and an action:

* ``skip``: neither checked nor recorded; the verdict is ``unique; skipped=NAME``;
* ``no-record``: checked as usual but never remembered.

Fields: ``envelope-sender``, ``recipient`` (any envelope recipient), ``from``, ``list-id``,
``auto-submitted``, ``precedence``, or ``header:NAME`` for any header field.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from mailfilter.values import Value, init

ACTIONS = ("skip", "no-record")
_NAMED_FIELDS = ("envelope-sender", "recipient", "from", "list-id", "auto-submitted",
                 "precedence")


class PolicyError(ValueError):
    """A rule that cannot work, worded for the postmaster."""


class Rule(Value):
    """One allow rule of ``[policy] rules``, compiled (see :func:`compile_rules`)."""

    __slots__ = ("name", "field", "pattern", "action")

    def __init__(self, name: str, field: str, pattern: re.Pattern[str], action: str) -> None:
        init(self, name=name, field=field, pattern=pattern, action=action)

    def matches(self, headers: Sequence[tuple[str, str]], sender: str | None,
                recipients: Sequence[str]) -> bool:
        if self.field == "envelope-sender":
            values: Iterable[str] = [sender or ""] if sender is not None else []
        elif self.field == "recipient":
            values = recipients
        else:
            wanted = self.field.removeprefix("header:").lower()
            values = (value for name, value in headers if name == wanted)
        return any(self.pattern.search(value) for value in values)


def compile_rules(rules: Sequence[dict[str, object]]) -> tuple[Rule, ...]:
    """Validated, compiled rules from the ``[policy] rules`` list of the settings."""
    compiled = []
    for number, rule in enumerate(rules, 1):
        if not isinstance(rule, dict):
            raise PolicyError(f"policy.rules[{number}] must be a table")
        unknown = set(rule) - {"name", "field", "pattern", "action"}
        if unknown:
            raise PolicyError(f"policy.rules[{number}]: unknown key {sorted(unknown)[0]}")
        name = str(rule.get("name") or f"rule{number}")
        field = str(rule.get("field", "")).lower()
        if field not in _NAMED_FIELDS and not (field.startswith("header:") and len(field) > 7):
            raise PolicyError(f"policy.rules[{number}] ({name}): field must be one of "
                              f"{', '.join(_NAMED_FIELDS)} or header:NAME, not {field!r}")
        action = str(rule.get("action", "skip"))
        if action not in ACTIONS:
            raise PolicyError(f"policy.rules[{number}] ({name}): action must be skip or "
                              f"no-record, not {action!r}")
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
            raise PolicyError(f"policy.rules[{number}]: name {name!r} must be a plain word")
        try:
            pattern = re.compile(str(rule.get("pattern", "")), re.IGNORECASE)
        except re.error as error:
            raise PolicyError(f"policy.rules[{number}] ({name}): bad pattern: {error}") from None
        compiled.append(Rule(name, field, pattern, action))
    return tuple(compiled)


def first_match(rules: Sequence[Rule], headers: Sequence[tuple[str, str]],
                sender: str | None, recipients: Sequence[str]) -> Rule | None:
    """The first rule that matches this message, if any."""
    for rule in rules:
        if rule.matches(headers, sender, recipients):
            return rule
    return None
