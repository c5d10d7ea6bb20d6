"""Real text for bench/realworld.py: prose, subjects and whole ham messages from the corpus.

The shared SpamAssassin corpus (``spamassassin.tar.gz``) is unpacked into a temporary folder;
its messages are the ``*.txt`` files, sorted.  From the ham folders (``easy-ham-*``,
``hard-ham-*``) this module keeps:

* **paragraphs**: prose people wrote (quoted lines, attributions, signatures, list footers,
  code and tables removed), grouped by the message they came from, so that a message's "own
  text" can be one to several paragraphs of one real author;
* **sentences**: single sentences of 4-30 words, for short notes and cover notes;
* **subjects**: real thread subjects (``Re:``/``Fwd:``/``[tag]`` prefixes removed);
* **hams**: whole plain-text ham messages (headers and body), for resends of a real message.

Everything is read once per run; the picks are made by the caller's seeded ``random.Random``.
"""

from __future__ import annotations

import email
import email.policy
import random
import re
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

WORD = re.compile(r"[^\W_]+")
_ATTRIBUTION = re.compile(
    r"(wrote|writes|said|schrieb|a écrit)\s*:\s*$|^-+\s*original message|^from:\s|^sent:\s|"
    r"^>|^\|", re.IGNORECASE)
_FOOTER_START = re.compile(
    r"^(-- ?$|_{10,}|-{10,}|={10,}|\*{10,}|#{10,}|~{10,}|-+ ?yahoo! groups sponsor|"
    r"to unsubscribe|your use of yahoo|sponsored by|this sf\.net email)", re.IGNORECASE)
_CODEISH = re.compile(r"[{};$<>=|\\]|^\s{4,}|^\t|\.\.\.\.|::")
_PREFIX = re.compile(r"^\s*((re|fwd?|fw|aw|sv|tr)\s*(\[\d+\])?\s*:\s*|\[[^\]]{1,40}\]\s*)+",
                     re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


@dataclass(frozen=True)
class Ham:
    """One real ham message: where it came from, its raw bytes, subject and plain body."""

    path: str
    raw: bytes
    subject: str
    body: str
    words: int


@dataclass
class TextPool:
    """The corpus text the cases are written with."""

    paragraphs: list[list[str]] = field(default_factory=list)   # by source message
    sentences: list[str] = field(default_factory=list)
    subjects: list[str] = field(default_factory=list)
    hams: list[Ham] = field(default_factory=list)

    # -- picks -------------------------------------------------------------------------

    def paragraph(self, rng: random.Random, min_words: int = 12,
                  max_words: int = 150) -> str:
        for _ in range(200):
            group = rng.choice(self.paragraphs)
            text = rng.choice(group)
            if min_words <= len(text.split()) <= max_words:
                return text
        return rng.choice(rng.choice(self.paragraphs))

    def prose(self, rng: random.Random, paragraphs: int = 1, min_words: int = 12) -> list[str]:
        """``paragraphs`` paragraphs by one author when the source has enough, else mixed."""
        rich = [g for g in self.paragraphs if len(g) >= paragraphs]
        group = list(rng.choice(rich)) if rich else []
        if len(group) >= paragraphs:
            start = rng.randrange(len(group) - paragraphs + 1)
            chosen = group[start:start + paragraphs]
            if all(len(p.split()) >= min_words for p in chosen):
                return chosen
        return [self.paragraph(rng, min_words) for _ in range(paragraphs)]

    def words_of_prose(self, rng: random.Random, low: int, high: int) -> str:
        """One block of real prose between ``low`` and ``high`` words (whole sentences)."""
        target = rng.randint(low, high)
        out: list[str] = []
        count = 0
        for _ in range(400):
            sentence = rng.choice(self.sentences)
            n = len(sentence.split())
            if count + n > high:
                continue
            out.append(sentence)
            count += n
            if count >= target:
                break
        return " ".join(out)

    def sentence(self, rng: random.Random, low: int = 4, high: int = 30) -> str:
        for _ in range(500):
            s = rng.choice(self.sentences)
            if low <= len(s.split()) <= high:
                return s
        return rng.choice(self.sentences)

    def subject(self, rng: random.Random) -> str:
        return rng.choice(self.subjects)

    def ham(self, rng: random.Random, low: int = 20, high: int = 600) -> Ham:
        for _ in range(500):
            h = rng.choice(self.hams)
            if low <= h.words <= high:
                return h
        return rng.choice(self.hams)


def _body_text(message: email.message.Message) -> str | None:
    part = next((p for p in message.walk() if p.get_content_type() == "text/plain"), None)
    if part is None:
        return None
    payload = part.get_payload(decode=True) or b""
    charset = part.get_content_charset() or "us-ascii"
    try:
        return payload.decode(charset)
    except (LookupError, UnicodeDecodeError):
        return payload.decode("latin-1")


def _own_lines(body: str) -> list[str]:
    """The body's lines up to its signature or list footer, quoted lines dropped."""
    kept: list[str] = []
    for line in body.splitlines():
        if _FOOTER_START.match(line.strip()) or line.startswith("-- "):
            break
        if _ATTRIBUTION.search(line.strip()):
            kept.append("")
            continue
        kept.append(line.rstrip())
    return kept


def _is_prose(text: str) -> bool:
    words = text.split()
    if not 6 <= len(words) <= 200:
        return False
    alpha = sum(1 for w in words if re.fullmatch(r"[A-Za-z][a-z']*[,.;:!?)\"]?|\(?[a-z]+", w))
    if alpha < 0.8 * len(words):
        return False
    if "http" in text or "www." in text or "@" in text:
        return False
    return text[0].isupper() and text[-1] in ".!?\")"


def _paragraphs(lines: list[str]) -> list[str]:
    out: list[str] = []
    block: list[str] = []
    for line in lines + [""]:
        if line.strip():
            block.append(line)
            continue
        if block:
            if not any(_CODEISH.search(b) for b in block):
                text = " ".join(b.strip() for b in block)
                text = re.sub(r"\s+", " ", text).strip()
                if _is_prose(text):
                    out.append(text)
            block = []
    return out


def _clean_subject(value: str) -> str:
    text = re.sub(r"\s+", " ", value).strip()
    text = _PREFIX.sub("", text).strip()
    return text


def load(tarball: Path, into: Path) -> TextPool:
    """Unpack the corpus into ``into`` and build the pool from its ham messages."""
    if not tarball.is_file():
        raise FileNotFoundError(f"corpus not found: {tarball} (shared/ must sit beside the "
                                f"project checkout, or pass --corpus)")
    with tarfile.open(tarball) as archive:
        archive.extractall(into, filter="data")
    files = sorted(into.rglob("*.txt"))
    pool = TextPool()
    seen_subjects: set[str] = set()
    seen_paragraphs: set[str] = set()
    for path in files:
        folder = path.parent.name
        if "ham" not in folder:
            continue
        raw = path.read_bytes()
        if raw.startswith(b"From "):
            raw = raw.split(b"\n", 1)[1] if b"\n" in raw else raw
        message = email.message_from_bytes(raw, policy=email.policy.compat32)
        subject = _clean_subject(str(message.get("Subject", "")))
        if (subject and subject.isascii() and 2 <= len(subject.split()) <= 12
                and subject.lower() not in seen_subjects and "$" not in subject
                and not subject.isupper()):
            seen_subjects.add(subject.lower())
            pool.subjects.append(subject)
        body = _body_text(message)
        if body is None:
            continue
        lines = _own_lines(body)
        paragraphs = [p for p in _paragraphs(lines) if p not in seen_paragraphs]
        seen_paragraphs.update(paragraphs)
        if paragraphs:
            pool.paragraphs.append(paragraphs)
            for paragraph in paragraphs:
                for sentence in _SENTENCE.split(paragraph):
                    if 4 <= len(sentence.split()) <= 30 and sentence[-1] in ".!?":
                        pool.sentences.append(sentence)
        if (message.get_content_type() == "text/plain" and not message.is_multipart()
                and body.isascii() and raw.isascii()):
            words = len(WORD.findall(body))
            relative = str(path.relative_to(path.parents[1]))
            pool.hams.append(Ham(relative, raw, subject, body, words))
    return pool
