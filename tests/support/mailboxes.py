"""Real mailboxes for the dedupe tests: Maildir folders and mbox files filled with corpus
messages plus crafted copies of some of them (as a second fetch, a migration, a forward
or a templated notice leave them)."""

from __future__ import annotations

import base64
import hashlib
import os
import quopri
import re
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from pathlib import Path

_FROM_LINE = re.compile(rb"^(>*From )", re.MULTILINE)


def strip_from_line(raw: bytes) -> bytes:
    """A corpus file without its mbox ``From `` line (a Maildir file has none)."""
    return raw.split(b"\n", 1)[1] if raw.startswith(b"From ") else raw


def split(raw: bytes) -> tuple[bytes, bytes]:
    head, _, body = raw.partition(b"\n\n")
    return head + b"\n", body


def header(raw: bytes, name: str) -> str | None:
    value = message_from_bytes(raw, policy=policy.compat32).get(name)
    return str(value) if value is not None else None


def refetched(raw: bytes) -> bytes:
    """The same message fetched again: one more Received line on top, same bytes below."""
    return (b"Received: from imap.example.net by mx.example.net (fetchmail-6.4.37)\n"
            b"\tfor <user@example.net> (single-drop); Fri, 04 Dec 2026 10:00:00 +0000\n" + raw)


def plain_text(raw: bytes) -> bool:
    """A single-part text/plain message without a transfer encoding (re-encodable)."""
    parsed = message_from_bytes(raw, policy=policy.compat32)
    return (not parsed.is_multipart() and parsed.get_content_type() == "text/plain"
            and str(parsed.get("Content-Transfer-Encoding", "7bit")).lower()
            in ("7bit", "8bit") and len(split(raw)[1]) > 400)


def reencoded(raw: bytes, encoding: str) -> bytes:
    """The same text/plain message with its body in quoted-printable or base64 (as a
    server migration or a client re-upload may store it)."""
    head, body = split(raw)
    head = re.sub(rb"(?im)^content-transfer-encoding:.*\n", b"", head)
    if encoding == "base64":
        encoded = base64.encodebytes(body)
    else:
        encoded = quopri.encodestring(body)
    return head + f"Content-Transfer-Encoding: {encoding}\n".encode() + b"\n" + encoded


def forwarded(raw: bytes, number: int) -> bytes:
    """The message forwarded inline by its recipient to themselves: new headers, the whole
    text below a forward line."""
    parsed = message_from_bytes(raw, policy=policy.compat32)
    _, body = split(raw)
    subject = parsed.get("Subject", "")
    return (f"From: Recipient <zzzz@example.net>\nTo: zzzz@example.net\n"
            f"Subject: Fwd: {subject}\nDate: Fri, 04 Dec 2026 09:{number % 60:02d}:00 +0000\n"
            f"Message-ID: <fwd.{number}@example.net>\nMIME-Version: 1.0\n"
            f"Content-Type: text/plain; charset=us-ascii\n\n"
            f"---------- Forwarded message ----------\nFrom: {parsed.get('From', '')}\n"
            f"Subject: {subject}\n\n").encode() + body


def notice(number: int, order: str, amount: str) -> bytes:
    """A shop's order notice: the same template with another order's data (not a copy)."""
    return (f"From: Example Shop <orders@shop.example>\nTo: zzzz@example.net\n"
            f"Subject: Your order {order} has shipped\n"
            f"Date: Fri, 04 Dec 2026 08:{number:02d}:00 +0000\n"
            f"Message-ID: <order.{order}@shop.example>\nMIME-Version: 1.0\n"
            f"Content-Type: text/plain; charset=us-ascii\n\n"
            f"Hello,\n\nthank you for shopping with Example Shop. Your order {order} has "
            f"shipped today and is on its way to you.\n\nOrder number: {order}\n"
            f"Amount charged: {amount} EUR\nTracking number: 1Z{order}X{number:04d}\n"
            f"Expected delivery: within 3 to 5 working days\n\nYou can follow your parcel "
            f"on our website with the tracking number above. If anything is wrong with "
            f"your order, reply to this message and our customer service team will help "
            f"you as soon as possible.\n\nKind regards,\nThe Example Shop team\n"
            ).encode()


@dataclass
class Filled:
    """What a test mailbox holds: every message's bytes by name, and which are copies of
    which (name → the name of the original)."""

    messages: dict[str, bytes] = field(default_factory=dict)
    copies: dict[str, str] = field(default_factory=dict)
    near_copies: dict[str, str] = field(default_factory=dict)
    must_stay: set[str] = field(default_factory=set)
    # Near copies the corpus itself holds (see :func:`corpus_resends`), in near_copies too.
    resends: set[str] = field(default_factory=set)

    @property
    def distinct(self) -> set[str]:
        return set(self.messages) - set(self.copies) - set(self.near_copies)


def corpus_mail(corpus_messages: list[Path], count: int, *, start: int = 0) -> list[bytes]:
    """``count`` corpus messages with distinct Message-IDs (the corpus holds a few
    crossposts), from ``start`` on."""
    seen: set[str] = set()
    chosen: list[bytes] = []
    for path in corpus_messages[start:]:
        raw = strip_from_line(path.read_bytes())
        key = header(raw, "Message-ID") or hashlib.sha256(raw).hexdigest()
        if key.strip().lower() in seen:
            continue
        seen.add(key.strip().lower())
        chosen.append(raw)
        if len(chosen) == count:
            break
    return chosen


def text_lines(raw: bytes) -> list[str]:
    """The decoded text of every text part of ``raw``, one whitespace-normalised line per
    non-blank line."""
    lines = []
    for part in message_from_bytes(raw, policy=policy.compat32).walk():
        if part.get_content_maintype() != "text":
            continue
        payload = part.get_payload(decode=True) or b""
        lines += [" ".join(line.split()) for line in
                  payload.decode("latin-1").splitlines() if line.strip()]
    return lines


def _signature_cut(lines: list[str]) -> tuple[str, ...]:
    """``lines`` up to a signature separator (``-- ``, normalised to ``--``)."""
    return tuple(lines[:lines.index("--")] if "--" in lines else lines)


def _one_line_more(longer: tuple[str, ...], shorter: tuple[str, ...]) -> bool:
    """True when ``longer`` is ``shorter`` with one line added somewhere."""
    if len(longer) != len(shorter) + 1:
        return False
    at = next((i for i, (a, b) in enumerate(zip(longer, shorter, strict=False)) if a != b),
              len(shorter))
    return longer[at + 1:] == shorter[at:]


def corpus_resends(mail: dict[str, bytes]) -> dict[str, str]:
    """Copies the corpus holds under other Message-IDs (name → the name of the first of
    its kind): the same decoded text after whitespace normalisation (a crosspost, a spam
    run); or from the same sender the same words once quote marks and a signature are left
    out (a resend, re-wrapped, signed), or the same lines with one line added (a resend
    with a comment).  Linear: texts are bucketed, only neighbours compared."""
    same_text: dict[tuple[str, ...], str] = {}
    same_words: dict[tuple[str, tuple[str, ...]], str] = {}
    by_sender: dict[tuple[str, int], list[tuple[str, tuple[str, ...]]]] = {}
    found: dict[str, str] = {}
    for name in sorted(mail):
        lines = text_lines(mail[name])
        if not lines:
            continue
        sender = (header(mail[name], "From") or "").lower()
        cut = _signature_cut(lines)
        words = (sender, tuple(word for line in cut for word in line.split()
                               if word.strip(">")))
        original = same_text.get(tuple(lines)) or same_words.get(words) or next(
            (other for other, text in by_sender.get((sender, len(cut) - 1), ())
             if _one_line_more(cut, text)), None) or next(
            (other for other, text in by_sender.get((sender, len(cut) + 1), ())
             if _one_line_more(text, cut)), None)
        if original is not None:
            found[name] = found.get(original, original)
            continue
        same_text[tuple(lines)] = same_words[words] = name
        by_sender.setdefault((sender, len(cut)), []).append((name, cut))
    return found


def crafted_mailbox(corpus_messages: list[Path], originals: int = 60) -> Filled:
    """Corpus messages, then copies of some: re-fetched exact copies, quoted-printable and
    base64 re-encodings, forwards, and two templated notices that must both stay."""
    filled = Filled()
    mail = corpus_mail(corpus_messages, originals)
    for number, raw in enumerate(mail):
        filled.messages[f"m{number:04d}"] = raw
    plain = [n for n, raw in enumerate(mail) if plain_text(raw)]
    for number in range(0, originals, 7):
        filled.messages[f"refetch{number:04d}"] = refetched(mail[number])
        filled.copies[f"refetch{number:04d}"] = f"m{number:04d}"
    for index, number in enumerate(plain[:6]):
        encoding = "base64" if index % 2 else "quoted-printable"
        filled.messages[f"reenc{number:04d}"] = reencoded(mail[number], encoding)
        filled.copies[f"reenc{number:04d}"] = f"m{number:04d}"
    for number in plain[6:9]:
        filled.messages[f"fwd{number:04d}"] = forwarded(mail[number], number)
        filled.near_copies[f"fwd{number:04d}"] = f"m{number:04d}"
    filled.messages["notice1"] = notice(1, "4711-2026", "59.90")
    filled.messages["notice2"] = notice(2, "5823-2026", "12.40")
    filled.must_stay |= {"notice1", "notice2"}
    resends = corpus_resends({n: raw for n, raw in filled.messages.items()
                              if n.startswith("m")})
    filled.near_copies |= resends
    filled.resends = set(resends)
    return filled


def fill_maildir(folder: Path, messages: dict[str, bytes], *, when: float = 1.7e9) -> None:
    """A Maildir (tmp, new, cur) with each message in ``cur`` as ``NAME.host:2,S``; file
    times one second apart in name order."""
    for sub in ("tmp", "new", "cur"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    for number, (name, raw) in enumerate(sorted(messages.items())):
        path = folder / "cur" / f"{name}.test:2,S"
        path.write_bytes(raw)
        os.utime(path, (when + number, when + number))


def mbox_bytes(messages: dict[str, bytes]) -> bytes:
    """An mboxrd file of the messages in name order (``From `` lines quoted)."""
    out = []
    for name, raw in sorted(messages.items()):
        body = _FROM_LINE.sub(rb">\1", raw)
        if not body.endswith(b"\n"):
            body += b"\n"
        out.append(b"From " + name.encode() + b"@test  Fri Dec  4 10:00:00 2026\n" + body
                   + b"\n")
    return b"".join(out)


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (relative path → SHA-256 of its bytes)."""
    return {str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*")) if path.is_file()}


def contents(root: Path) -> list[str]:
    """The SHA-256 of every message file under ``root``, sorted (where they are aside)."""
    return sorted(hashlib.sha256(path.read_bytes()).hexdigest()
                  for path in root.rglob("*") if path.is_file()
                  and path.parent.name in ("cur", "new"))
