"""Several addresses of one person: ``[detector] aliases``, a map of addresses to mailboxes.

With recipient scope, a message is a duplicate for a recipient who already received it.
``jane@example.org`` and ``j.doe@example.org`` are two recipients unless this map says
they are one mailbox: then one newsletter sent to both is a duplicate the second time.

The file has one alias a line, as Postfix's virtual(5) table does: the address, white
space (or a colon), the mailbox it delivers to.  ``#`` starts a comment; blank lines are
ignored.  A mailbox may itself appear as an address; chains are followed.

    # alias                 mailbox
    j.doe@example.org       jane@example.org
    jane.doe@example.com    jane@example.org
"""

from __future__ import annotations

import re
from pathlib import Path

from mailfilter.config import ConfigError

_LINE = re.compile(r"^\s*(\S+?)\s*(?::\s*|\s+)(\S+)\s*$")
_ADDRESS = re.compile(r"[^\s@<>\"]+@[^\s@<>\"]+")
# What a regexp:/pcre: table line holds and an address never does (outside quotes).
_PATTERN_CHARACTERS = ("/", "^", "$", "*", "(", ")", "[", "]", "\\", "|")


def bare(address: str) -> str:
    """An address as recipients are compared: no brackets or spaces, lower case."""
    return address.strip().strip("<>").strip().lower()


def load_aliases(path: str) -> dict[str, str]:
    """Alias → mailbox from the file at ``path`` (``{}`` for an empty path); a line that
    is not two addresses is a :class:`ConfigError` naming the file and line."""
    if not path:
        return {}
    try:
        text = Path(path).read_text(encoding="utf-8-sig")     # an editor's BOM is no text
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the aliases file: {error.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: the aliases file is not UTF-8 text") from None
    aliases: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0]
        if not line.strip():
            continue
        found = _LINE.match(line)
        if found and any(char in found.group(1) for char in _PATTERN_CHARACTERS):
            raise ConfigError(f"{path}:{number}: {found.group(1)!r} is a pattern, not an "
                              "address: only literal addresses are supported (a Postfix "
                              "regexp: or pcre: table cannot be used here), e.g. "
                              "j.doe@example.org jane@example.org")
        if not found or not all(_ADDRESS.fullmatch(bare(part)) for part in found.groups()):
            raise ConfigError(f"{path}:{number}: expected ALIAS MAILBOX (two mail addresses, "
                              f"e.g. j.doe@example.org jane@example.org), not {line.strip()!r}")
        alias, mailbox = (bare(part) for part in found.groups())
        aliases[alias] = mailbox
    for alias in list(aliases):     # follow chains (a → b → c), stopping at cycles
        seen = {alias}
        target = aliases[alias]
        while target in aliases and target not in seen:
            seen.add(target)
            target = aliases[target]
        aliases[alias] = target
    return aliases
