"""A busy host's store, for the benches' populated mode: detection where it matters, in a
store as full as a real mail host's, not only an empty one.

:func:`build` fills an LMDB store, once, with (every message to mailboxes of the host
``busy.example``, none of them a case's recipient):

* list mail: the first ``lists`` ham messages of the shared corpus (real list traffic:
  footers, signatures, quoted threads), each delivered to 3–8 of 300 list members;
* mass mailings: ``mailings`` newsletters, each personalised (greeting, subscriber number,
  unsubscribe token, Message-ID) for ``subscribers`` mailboxes;
* campaigns: ``campaigns`` corpus spam messages, each sent ``copies`` times with a random
  token in the subject and a new sender local part, to random mailboxes.

:func:`case_in` then runs one case in that store inside a write transaction that is rolled
back, so every case sees the same busy store and none sees another's messages; before the
case's own messages it delivers ``personalised`` personalised copies of the case's first
message to other mailboxes (a mass mailing that included the case's recipient).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from mailfilter.config import Settings
from mailfilter.engine import Engine, remember

T = TypeVar("T")
HOST = "busy.example"
_MESSAGE_ID = re.compile(rb"^(Message-ID:[ \t]*)(.*)$", re.IGNORECASE | re.MULTILINE)
_SUBJECT = re.compile(rb"^(Subject:[ \t]*)(.*)$", re.IGNORECASE | re.MULTILINE)
_FROM = re.compile(rb"^(From:.*?)([\w.+-]+)@", re.IGNORECASE | re.MULTILINE)
_NAMES = ["Ann", "Bob", "Carla", "Dev", "Emre", "Fatima", "Gao", "Hanna", "Ivo", "Jana",
          "Kemal", "Lena", "Mats", "Nora", "Omar", "Pia", "Quinn", "Rosa", "Sven", "Tara"]
_NEWSLETTER = (
    "This week in the {topic} newsletter: the projects our readers sent in, the talks of "
    "the autumn meetup and where to find the slides, a long read on keeping backups you can "
    "actually restore, three tools we tried and what we made of them, and the jobs board. "
    "Thank you for reading, and for the many replies to last week's survey: we read every "
    "one, and the most asked question gets its own article next month. If you run a local "
    "group, our organiser kit has posters, a talk template and a checklist for the venue. "
    "As always, forward this letter to a colleague who might like it.")


def _personalised(raw: bytes, number: int, name: str) -> bytes:
    """``raw`` as one subscriber's copy: its own Message-ID and, for a plain one-part
    body, a greeting line of its own (a MIME body is left as it is)."""
    head, separator, body = raw.partition(b"\n\n")
    copy_id = f"<busy.{number}.{random.Random(number).getrandbits(40):x}@{HOST}>".encode()
    if _MESSAGE_ID.search(head):
        head = _MESSAGE_ID.sub(lambda m: m.group(1) + copy_id, head, count=1)
    else:
        head += b"\nMessage-ID: " + copy_id
    if b"multipart/" not in head.lower() and b"transfer-encoding: base64" not in head.lower():
        body = f"Hi {name},\n\n".encode() + body
    return head + (separator or b"\n\n") + body


def _newsletter(issue: int, number: int) -> bytes:
    name = _NAMES[number % len(_NAMES)]
    token = random.Random(issue * 100_003 + number).getrandbits(64)
    body = (f"Hi {name},\n\n{_NEWSLETTER.format(topic=f'issue {issue}')}\n\n"
            f"You are subscriber {number:05d}. Unsubscribe: "
            f"https://news{issue}.example.com/u/{token:016x}\n")
    return (f"From: The Weekly {issue} <letters@news{issue}.example.com>\n"
            f"To: m{number}@{HOST}\nSubject: The Weekly {issue}: issue 212\n"
            f"Date: Mon, 30 Nov 2026 06:00:00 +0000\n"
            f"Message-ID: <w{issue}.{number}.{token:x}@news{issue}.example.com>\n"
            f"List-Unsubscribe: <https://news{issue}.example.com/u/{token:016x}>\n\n"
            f"{body}").encode()


def _campaign_copy(raw: bytes, rng: random.Random) -> bytes:
    token = str(rng.randrange(10_000, 99_999)).encode()
    raw = _SUBJECT.sub(lambda m: m.group(1) + m.group(2).rstrip() + b" " + token, raw,
                       count=1)
    raw = _FROM.sub(lambda m: m.group(1) + f"offer{rng.getrandbits(24):x}".encode() + b"@",
                    raw, count=1)
    return _personalised(raw, rng.getrandbits(30), "")


def traffic(hams: Sequence[bytes], spams: Sequence[bytes], *, seed: int = 1,
            lists: int = 4000, mailings: int = 6, subscribers: int = 300,
            campaigns: int = 5, copies: int = 60) -> Iterable[tuple[bytes, list[str]]]:
    """The busy host's mail, (raw, recipients), in a seeded order of arrival."""
    rng = random.Random(f"busy:{seed}")
    members = [f"m{n}@{HOST}" for n in range(300)]
    items: list[tuple[bytes, list[str]]] = []
    for raw in hams[:lists]:
        items.append((raw, rng.sample(members, rng.randrange(3, 9))))
    for issue in range(mailings):
        items += [(_newsletter(issue, number), [f"s{issue}.{number}@{HOST}"])
                  for number in range(subscribers)]
    for raw in spams[:campaigns]:
        items += [(_campaign_copy(raw, rng), [rng.choice(members)]) for _ in range(copies)]
    rng.shuffle(items)
    return items


@dataclass(frozen=True)
class BusyStore:
    """Where the busy store is, and its messages by Message-ID (to tell a message that
    matches the host's traffic from one that matches a case)."""

    location: Path
    by_message_id: dict[str, bytes]


def build(folder: Path, settings: Settings, hams: Sequence[bytes], spams: Sequence[bytes],
          *, seed: int = 1, **sizes: int) -> BusyStore:
    """Write the busy store into ``folder``."""
    store = folder / "busy-store"
    by_message_id: dict[str, bytes] = {}
    with Engine(settings, str(store)) as engine:
        batch: list[tuple[bytes, list[str]]] = []

        def flush() -> None:
            analyses = [(engine.analyse(raw), raw, recipients) for raw, recipients in batch]
            engine.store.atomically(lambda: [
                engine.process(analysis, recipients, remember, now=1_790_000_000)
                for analysis, _raw, recipients in analyses])
            for analysis, raw, _recipients in analyses:
                if analysis.message_id:
                    by_message_id.setdefault(analysis.message_id, raw)
            batch.clear()
        for item in traffic(hams, spams, seed=seed, **sizes):
            batch.append(item)
            if len(batch) >= 500:
                flush()
        flush()
    return BusyStore(store, by_message_id)


class _RolledBack(Exception):
    """Ends a case's transaction without committing it."""


def case_in(engine: Engine, first: bytes, run: Callable[[], T], *, personalised: int = 12
            ) -> T:
    """``run()`` (a case's deliveries through ``engine``) in the busy store, after
    ``personalised`` personalised copies of the case's first message went to other
    mailboxes; everything it wrote is rolled back."""
    result: list[T] = []

    def inside() -> None:
        for number in range(personalised):
            copy = _personalised(first, 900_000 + number, _NAMES[number % len(_NAMES)])
            engine.process(engine.analyse(copy), [f"other{number}@{HOST}"], remember)
        result.append(run())
        raise _RolledBack
    try:
        engine.store.atomically(inside)
    except _RolledBack:
        pass
    return result[0]


def corpus_messages(root: Path) -> tuple[list[bytes], list[bytes]]:
    """(ham, spam) raw messages of an unpacked corpus, in a stable order."""
    files = sorted(root.rglob("*.txt"))
    hams = [path.read_bytes() for path in files if "ham" in path.parent.name]
    spams = [path.read_bytes() for path in files if "spam" in path.parent.name]
    return hams, spams
