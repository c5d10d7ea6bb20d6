"""The fenced blocks of README.md and docs/*.md, each with the test marker above it.

Every fenced block carries an HTML comment on the line right above its opening fence (it
does not show on a rendered page)::

    <!-- doc-test: KIND [NAME] -->        a block that a test runs or validates
    <!-- doc-test: none REASON -->        not a command (a diagram), and why

KINDS says which test covers each kind; blocks that a test needs one by one (shell blocks
that must run in a set order, the Postfix master.cf variants) also carry a NAME, and
NAMED lists the names the tests know.  tests/test_docs.py fails on a block without a
marker, with an unknown kind, or with a name no test looks up, so a new block cannot go
untested by accident.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# kind → the test that covers it (test_docs.py, or sandboxed_docs.py run by test_docs.py
# inside a private mount/network/PID namespace).
KINDS: dict[str, str] = {
    "system": "sandboxed_docs.py: run as root, as written, in the private namespace",
    "systemctl": "sandboxed_docs.py: `systemctl enable` of the installed units + "
                 "systemd-analyze verify (no systemd as PID 1 to start them)",
    "milter-daemon": "sandboxed_docs.py: started as written, mail passed through Postfix",
    "smtpd-daemon": "sandboxed_docs.py: started as written, in both Postfix loops",
    "postfix-main": "sandboxed_docs.py: these main.cf lines in a private Postfix + milter",
    "postfix-master": "sandboxed_docs.py: these master.cf entries in a private Postfix",
    "milter-log": "sandboxed_docs.py: same keys in the same order as the milter's line",
    "smtpd-log": "sandboxed_docs.py: same keys in the same order as dupfilter-smtpd's line",
    "dovecot-conf": "sandboxed_docs.py: installed where the doc says; doveconf shows it",
    "sieve": "sandboxed_docs.py: sievec + sieve-test as a mail user, two copies",
    "maildrop": "test_docs.py: the filter file of `maildrop`, dupfilter found and not "
                "found; sandboxed_docs.py: ~/.mailfilter of a user, `maildrop -d`, two copies",
    "filter-stderr": "sandboxed_docs.py: the same line from a real full disk (tmpfs)",
    "crontab": "sandboxed_docs.py: fields checked, job run as a user with cron's PATH",
    "procmail": "test_docs.py (procmail -m, dupfilter found and not found) and "
                "sandboxed_docs.py (procmail -d USER)",
    "procmail-path": "test_docs.py: the first line of every recipe's rc there, with the "
                     "test's virtual environment for /opt/dupfilter/bin",
    "procmail-log": "test_docs.py: what procmail logs for the --tag recipe when dupfilter "
                    "is not on its PATH",
    "toml": "test_docs.py: `dupfilter-db config --check`; named ones used by the scenarios",
    "header": "test_docs.py: same fields in the same order as the header the filter writes",
    "sendmail-mc": "test_docs.py: expanded with sendmail-cf's m4 into a sendmail.cf",
    "bench": "test_docs.py: each command run with a small corpus sample appended",
    "ci": "test_docs.py: bash -n; the last line runs pytest; package list as in README",
    "dedupe": "test_dedupe.py: run in order as written, in a home with ~/Maildir (and "
              ".Archive) and ~/mail/inbox holding corpus mail and copies",
    "dedupe-imap": "test_dedupe_imap.py: run as written against the test's Dovecot, its "
                   "address for imap.example.org, ~/.imap-password holding the password",
    "none": "not a command; the marker says why",
}

# (kind, name) pairs that tests look up by name.
NAMED: set[tuple[str, str]] = {
    ("system", "readme-install"),
    ("system", "operations-install"),
    ("system", "milter-install"),
    ("system", "milter-dirs"),
    ("system", "install-debian"),
    ("system", "install-system"),
    ("system", "install-upgrade"),
    ("system", "install-uninstall"),
    ("system", "sieve-programs"),
    ("system", "sieve-compile"),
    ("postfix-master", "after-queue"),
    ("postfix-master", "proxy"),
    ("toml", "milter"),
    ("toml", "policy"),
    ("toml", "redis"),
}

# Kinds whose blocks the tests take one by one: each needs a NAME listed in NAMED.
BY_NAME = {"system", "postfix-master"}

_FENCE = re.compile(r"^(\s*)(```+)(\S*)\s*$")
_MARKER = re.compile(r"^<!-- doc-test: (\S+)(?: (.*?))? -->$")


@dataclass(frozen=True)
class Block:
    """One fenced block and its marker."""

    path: Path
    line: int                 # line of the opening fence (1-based)
    language: str
    kind: str | None          # None: no marker above the fence
    name: str                 # the marker's NAME (or the reason, for kind "none")
    text: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    def lines(self) -> list[str]:
        """Non-blank lines that are not comments (``#`` at the start)."""
        return [line for line in self.text.splitlines()
                if line.strip() and not line.lstrip().startswith("#")]


def blocks_of(path: Path) -> list[Block]:
    """Every fenced block of one markdown file, in order."""
    found: list[Block] = []
    lines = path.read_text().splitlines()
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, fence, language = opening.groups()
        end = index + 1
        while end < len(lines) and lines[end].strip() != fence:
            end += 1
        body = "\n".join(line[len(indent):] for line in lines[index + 1:end]) + "\n"
        marker = _MARKER.match(lines[index - 1].strip()) if index else None
        kind, name = (marker.group(1), marker.group(2) or "") if marker else (None, "")
        found.append(Block(path, index + 1, language, kind, name, body))
        index = end + 1
    return found


def all_blocks() -> list[Block]:
    return [block for path in DOCUMENTS for block in blocks_of(path)]


def blocks(kind: str) -> list[Block]:
    """Every block of one kind, in document order."""
    return [block for block in all_blocks() if block.kind == kind]


def block(kind: str, name: str) -> Block:
    """The one block of this kind with this name."""
    (found,) = [b for b in all_blocks() if b.kind == kind and b.name == name]
    return found
