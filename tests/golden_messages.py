"""Deterministic generator of varied raw messages for the chisto golden vectors.

``make_message(seed)`` depends only on ``seed`` (through ``random.Random(seed)``), so a
vector file need store only the seed and chisto's answer.  The kind of message cycles with
``seed % len(KINDS)`` so every run of ``len(KINDS)`` consecutive seeds covers every kind.

No generated message contains a NUL byte (0x00): chisto's ``strchr(alphabet, c)`` finds
the alphabet's terminating NUL when ``c == 0`` and increments ``work[36]``, one past the
end of its array.  That is undefined behaviour, so chisto has no defined answer to match.

Changing anything here changes the messages: regenerate the vectors afterwards with
``python3 tests/make_chisto_vectors.py``.
"""

from __future__ import annotations

import random
from collections import Counter

KINDS: tuple[str, ...] = (
    "plain",          # LF headers, "\n\n", short body (counts < 255: no scaling)
    "crlf",           # CRLF throughout: "\r\n\r\n" is no separator for chisto
    "mixed_endings",  # CRLF, LF and bare CR lines mixed, headers and body
    "no_blank_line",  # no "\n\n" anywhere: chisto counts nothing
    "blank_first",    # the message starts with an empty line
    "mbox",           # mbox "From " envelope line first, ">From " in the body
    "long",           # bodies of 2 kB to 400 kB: scaling and truncation
    "max_exact",      # the largest bin hits an exact count (255, 256, 100000, ...)
    "eight_bit",      # Latin-1, UTF-8 and raw 0x80-0xff bytes everywhere
    "tiny",           # degenerate shapes: empty, separators only, one character
)

# Largest-bin counts for "max_exact": 255 is the last unscaled count, 256 the first scaled
# one; with 319, 333 and 100000 the double product (255 / max) * max truncates to 254.
MAX_TARGETS: tuple[int, ...] = (255, 256, 100000, 319, 257, 333, 510, 4096, 65536, 1000)

ALNUM = b"0123456789abcdefghijklmnopqrstuvwxyz"
PUNCTUATION = b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
CONTROLS = b"\t\x01\x07\x08\x0b\x0c\x1b\x7f"           # deliberately no \x00
WORDS = (
    "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog", "mail", "message",
    "duplicate", "list", "unsubscribe", "click", "here", "free", "offer", "meeting",
    "tomorrow", "patch", "kernel", "server", "zip", "jazz", "quiz", "vex", "wyvern",
    "rhythm", "syzygy", "example", "www", "http", "html", "re", "fwd", "regards",
    "thanks", "invoice", "password", "account", "money", "million", "dollars", "xyzzy",
)
LATIN1_WORDS = (b"caf\xe9", b"na\xefve", b"\xc4RGER", b"M\xdcNCHEN", b"\xe0 bient\xf4t",
                b"\xdf\xfe\xf0\xff", b"\xa9 2002", b"\xbd\xbc\xbe")
# The last four catch a Unicode-aware fold: KELVIN SIGN and "İ" lower() to ASCII "k" and
# "i", LONG S casefold()s to "s", and Arabic-Indic digits are str.isdigit(); chisto counts
# none of them.
UTF8_WORDS = tuple(word.encode("utf-8") for word in (
    "café", "naïve", "ÄRGER", "Ünïcödé", "東京", "Привет", "€100", "ＡＢＣ１２３", "ǅemal",
    "\u212a", "\u0130stanbul", "\u017fun", "\u0661\u0662"))
HEADER_NAMES = ("Subject", "From", "To", "Cc", "Date", "Message-ID", "Received",
                "X-Mailer", "Content-Type", "MIME-Version", "Reply-To", "X-Spam-Status")


def message_kind(seed: int) -> str:
    """The kind of message ``make_message(seed)`` builds."""
    return KINDS[seed % len(KINDS)]


def _cased(rng: random.Random, word: str) -> str:
    style = rng.randrange(5)
    if style == 0:
        return word.upper()
    if style == 1:
        return word.title()
    if style == 2:
        return "".join(c.upper() if rng.random() < 0.5 else c for c in word)
    return word


def _token(rng: random.Random, eight_bit: float = 0.05) -> bytes:
    """One space-free token: a cased word, a number, punctuation, controls or 8-bit bytes."""
    roll = rng.random()
    if roll < eight_bit:
        if rng.random() < 0.5:
            return rng.choice(LATIN1_WORDS + UTF8_WORDS)
        return bytes(rng.randrange(0x80, 0x100) for _ in range(rng.randrange(1, 6)))
    if roll < 0.70:
        return _cased(rng, rng.choice(WORDS)).encode("ascii")
    if roll < 0.82:
        return str(rng.randrange(10 ** rng.randrange(1, 9))).encode("ascii")
    if roll < 0.92:
        return bytes(rng.choice(PUNCTUATION) for _ in range(rng.randrange(1, 4)))
    if roll < 0.95:
        return bytes(rng.choice(CONTROLS) for _ in range(rng.randrange(1, 3)))
    word = _cased(rng, rng.choice(WORDS)).encode("ascii")
    return word + bytes([rng.choice(PUNCTUATION)]) + str(rng.randrange(100)).encode("ascii")


def _text_line(rng: random.Random, width: int, eight_bit: float = 0.05) -> bytes:
    """A non-empty line of tokens (no line ending), at most about ``width`` bytes."""
    tokens = [_token(rng, eight_bit)]
    while sum(len(t) + 1 for t in tokens) < width:
        tokens.append(_token(rng, eight_bit))
    line = b" ".join(tokens)
    if rng.random() < 0.15:
        line = b"> " * rng.randrange(1, 3) + line
    return line


def _body_lines(rng: random.Random, size: int, eight_bit: float = 0.05,
                paragraphs: bool = True) -> list[bytes]:
    """Lines of about ``size`` bytes in total; ``b""`` entries are paragraph breaks."""
    lines: list[bytes] = []
    total = 0
    while total < size:
        if paragraphs and lines and lines[-1] and rng.random() < 0.15:
            lines.append(b"")
            continue
        line = _text_line(rng, rng.randrange(8, 78), eight_bit)
        lines.append(line)
        total += len(line) + 1
    return lines


def _headers(rng: random.Random, eight_bit: float = 0.02) -> list[bytes]:
    """Header lines (no endings), some folded, values full of countable characters."""
    lines: list[bytes] = []
    for name in rng.sample(HEADER_NAMES, rng.randrange(1, len(HEADER_NAMES))):
        lines.append(name.encode("ascii") + b": " + _text_line(rng, rng.randrange(5, 70),
                                                                eight_bit))
        if rng.random() < 0.2:
            lines.append(rng.choice((b"\t", b" ", b"    ")) + _text_line(rng, 40, eight_bit))
    return lines


def _mbox_line(rng: random.Random) -> bytes:
    day = rng.choice(("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"))
    return (f"From user{rng.randrange(1000)}@example.org {day} Sep {rng.randrange(1, 29):2d} "
            f"{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d} 2002"
            ).encode("ascii")


def _join(lines: list[bytes], eol: bytes, final: bool = True) -> bytes:
    return eol.join(lines) + (eol if final and lines else b"")


def _mixed_join(rng: random.Random, lines: list[bytes]) -> bytes:
    return b"".join(line + rng.choice((b"\n", b"\r\n", b"\r\n", b"\r")) for line in lines)


def _plain(rng: random.Random) -> bytes:
    header = _headers(rng)
    body = _body_lines(rng, rng.randrange(0, 1500))
    if rng.random() < 0.3:
        header.insert(0, _mbox_line(rng))
    return _join(header, b"\n") + b"\n" + _join(body, b"\n", final=rng.random() < 0.8)


def _crlf(rng: random.Random) -> bytes:
    header = _join(_headers(rng), b"\r\n")
    body = _join(_body_lines(rng, rng.randrange(0, 3000)), b"\r\n")
    if rng.random() < 0.4:
        # A stray LF-only blank line somewhere in the body: chisto starts counting there.
        cut = rng.randrange(len(body) + 1)
        body = body[:cut] + b"\n\n" + body[cut:]
    return header + b"\r\n" + body


def _mixed_endings(rng: random.Random) -> bytes:
    header = _mixed_join(rng, _headers(rng))
    separator = rng.choice((b"\n", b"\r\n", b"\r", b"\n\r\n", b"\n\n"))
    return header + separator + _mixed_join(rng, _body_lines(rng, rng.randrange(0, 2000)))


def _no_blank_line(rng: random.Random) -> bytes:
    eol = rng.choice((b"\n", b"\r\n"))
    lines = _headers(rng) + _body_lines(rng, rng.randrange(0, 2000), paragraphs=False)
    if rng.random() < 0.5 and eol == b"\r\n":
        lines.insert(rng.randrange(len(lines) + 1), b"")   # "\r\n\r\n" is still no "\n\n"
    message = _join(lines, eol, final=rng.random() < 0.7)
    while b"\n\n" in message:
        message = message.replace(b"\n\n", b"\n")
    return message


def _blank_first(rng: random.Random) -> bytes:
    start = rng.choice((b"\n", b"\n", b"\n\n", b"\r\n", b"\n\r\n"))
    lines = _body_lines(rng, rng.randrange(0, 2000))
    if rng.random() < 0.5:
        lines = _headers(rng) + [b""] + lines
    return start + _join(lines, b"\n")


def _mbox(rng: random.Random) -> bytes:
    body = _body_lines(rng, rng.randrange(0, 2500))
    for _ in range(rng.randrange(0, 3)):
        body.insert(rng.randrange(len(body) + 1), b">From someone who wrote this")
    eol = b"\r\n" if rng.random() < 0.2 else b"\n"
    return _join([_mbox_line(rng), *_headers(rng)], eol) + eol + _join(body, eol)


def _repeated_body(rng: random.Random, size: int, eight_bit: float = 0.05) -> bytes:
    """About ``size`` bytes of body: a few kB of lines repeated with small variations."""
    block = _join(_body_lines(rng, min(size, rng.randrange(2000, 8000)), eight_bit), b"\n")
    parts: list[bytes] = []
    total = 0
    while total < size:
        part = block
        if rng.random() < 0.5:
            cut = rng.randrange(len(block) + 1)
            part = block[:cut] + _text_line(rng, 60, eight_bit) + b"\n" + block[cut:]
        parts.append(part)
        total += len(part)
    return b"".join(parts)


def _long(rng: random.Random) -> bytes:
    size = rng.choice((2_000, 5_000, 20_000, 100_000, 400_000))
    size = rng.randrange(size // 2, size + 1)
    return _join(_headers(rng), b"\n") + b"\n" + _repeated_body(rng, size)


def _alnum_counts(data: bytes) -> Counter[int]:
    """Occurrences of each of ``0-9a-z`` (case folded) in ``data``: the generator's aim only."""
    counts: Counter[int] = Counter()
    for byte in data:
        if 0x41 <= byte <= 0x5A:
            byte += 0x20
        if byte in ALNUM:
            counts[byte] += 1
    return counts


def _max_exact(rng: random.Random, target: int) -> bytes:
    """A body whose largest bin is exactly ``target`` (sometimes tied by a second character)."""
    filler = _repeated_body(rng, min(target * 2, 20_000)) if target > 2000 else _join(
        _body_lines(rng, rng.randrange(0, target + 1)), b"\n")
    counts = _alnum_counts(filler)
    chosen = rng.sample(ALNUM, 2 if rng.random() < 0.3 else 1)
    for char in chosen:
        if counts[char] > target:
            raise AssertionError(f"filler already has {counts[char]} of {chr(char)!r}")
    if max(counts.values(), default=0) > target:
        raise AssertionError("filler exceeds the target count")
    lines = filler.split(b"\n")
    for char in chosen:
        missing = target - counts[char]
        while missing:
            run = min(missing, rng.randrange(1, 80))
            missing -= run
            text = bytes(char if rng.random() < 0.7 else bytes([char]).upper()[0]
                         for _ in range(run))
            lines.insert(rng.randrange(len(lines) + 1), text)
    return _join(_headers(rng), b"\n") + b"\n" + b"\n".join(lines)


def _eight_bit(rng: random.Random) -> bytes:
    eol = rng.choice((b"\n", b"\r\n"))
    header = _join(_headers(rng, eight_bit=0.5), eol)
    if rng.random() < 0.3:
        body = _repeated_body(rng, rng.randrange(500, 30_000), eight_bit=0.6)
    else:
        body = _join(_body_lines(rng, rng.randrange(0, 2000), eight_bit=0.6), b"\n")
    noise = bytes(rng.randrange(1, 0x100) for _ in range(rng.randrange(0, 300)))
    return header + b"\n\n" + body + noise


def _tiny(rng: random.Random) -> bytes:
    shapes = (
        b"", b"\n", b"\n\n", b"\n\n\n", b"\r\n\r\n", b"\n\r\n", b"a", b"\n\nZ", b"\n\n\n9",
        b"Subject: only a header", b"Subject: no body\n", b"Subject: empty body\n\n",
        b"Subject: x\n\nA", b"Subject: x\r\n\r\nA", b"\xff\n\n\xff", b"\n\n\x7f\x80\x01",
    )
    shape = rng.choice(shapes)
    if rng.random() < 0.5:
        shape += bytes(rng.choice(ALNUM + PUNCTUATION + b"\n\r ABCXYZ")
                       for _ in range(rng.randrange(1, 40)))
    return shape


def make_message(seed: int) -> bytes:
    """A raw message (headers, then a body), the same bytes for the same ``seed``."""
    rng = random.Random(seed)
    kind = message_kind(seed)
    if kind == "max_exact":
        message = _max_exact(rng, MAX_TARGETS[(seed // len(KINDS)) % len(MAX_TARGETS)])
    else:
        message = {
            "plain": _plain, "crlf": _crlf, "mixed_endings": _mixed_endings,
            "no_blank_line": _no_blank_line, "blank_first": _blank_first, "mbox": _mbox,
            "long": _long, "eight_bit": _eight_bit, "tiny": _tiny,
        }[kind](rng)
    if b"\x00" in message:   # see the module docstring: NUL is undefined behaviour in chisto
        raise AssertionError(f"seed {seed} generated a NUL byte")
    return message
