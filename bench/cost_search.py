"""A random search for crafted messages that cost the analysis most: shapes nobody thought of.

The hostile-input suite (tests/test_hostile_input.py) and bench/hostile_cost.py measure the
shapes someone imagined.  This bench draws shapes at random instead: a unit of one to four
pieces (reply and forward lines, attributions, sign-offs, taglines, footers, rules, links,
codes, numbers, host names, non-ASCII words, HTML tags …) joined by a line break, a space,
a blank line or nothing, repeated to ``--size`` bytes, each analysed once in this process
(CPU time, ``engine.analyse``).  The costliest ``--top`` shapes are then analysed again at
1 and 4 MiB, the latter in a process of its own for its peak memory (VmHWM): a shape whose
cost a KB at 4 MiB is more than twice that at ``--size`` grows faster than its input (a
step is quadratic); one that takes longer than the daemons' ``[analysis] deadline`` at
4 MiB is judged on what is known without its body; one whose process peaks above
``--memory`` MB holds too much at once.

    python bench/cost_search.py                          # 300 shapes of 256 KB, seed 1
    python bench/cost_search.py --seed 7 --shapes 1000 --top 8
    python bench/cost_search.py --html                   # the units as an HTML part
    python bench/cost_search.py --mime                   # as a multipart body's lines

Each analysis runs under a timer of ``--limit`` seconds (SIGALRM): a shape past it is
reported as such, not waited for.  This search found the "forwards with taglines" (each
forwarded piece searched for from the text's start: quadratic), "de lines between blank
lines" and "forward lines" shapes of the suite; with ``--mime`` (delimiter lines, part
headers, encoded bodies as the units of a multipart body) its "many empty parts".
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PIECES = (
    "From: Ann <a@x.org>", "De: b", "Sent: Monday, 1 May 2024 10:00", "To: c", "Subject: d",
    "Date: Mon, 1 May 2024", "", "Hello there words", "> quoted line", "> > deeper", ">",
    "________________________________", "-----Original Message-----",
    "   -- Ursprüngliche Nachricht --", "---------- Forwarded message ---------",
    "Begin forwarded message:", "On Mon, Bob <b@x.org> wrote:", "Ann schrieb:",
    "Le lun., Bob a écrit :", "-- ", "--", "Sent from my iPhone", "Get Outlook for iOS",
    "Thanks,", "Best regards,", "Ann Lee", "Ann", "Cheers", "unsubscribe",
    "To unsubscribe from this list", "http://x.example.com/a?b=1",
    "https://nam02.safelinks.protection.outlook.com/?url=https%3A%2F%2Fx",
    "urldefense.com/v3/__https://x", "www.example.org", "a@b.example.com", "ORDER A2UEQVE8",
    "Your code: X7K2PQ", "Order #12345",
    "CONFIDENTIALITY NOTICE: This e-mail and any attachments are confidential.",
    "This message was sent to you because", "==========", "----------", "***", "~~~~~~",
    "#####", "Resending this as the first one bounced", "Any update on this?", "FYI",
    "Sent again", "10:30", "2026-12-01", "49.99", "web03", "a1b2c3d4e5",
    "db-primary.example.org", "/var/log/app/app.log", "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    "X" * 77, "é" * 5, "日本語のテキスト", "\t", " ", "\xa0",
    "Am 1. Mai 2024 um 10:00 schrieb Bob:", "Von: x", "Gesendet: y", "Objet : z",
    "Envoyé : w", "*From:* a", "Reply-To: r", "Cc: e", "  wrapped value",
    "issuecomment-12345", "[cid:image001.png@01D]", "GREAT OFFER", "Click here", "!!!", "1",
    "a", "=", "-", "_", ">From x", "BEGIN:VCALENDAR", "END:VEVENT")
HTML_PIECES = ("<br>", "<br", "<p>", "</p>", "<div>", "</div>", "<blockquote>", "<hr>",
               "<table><tr><td>", "</td></tr></table>", "<a href='https://x.example/a'>",
               "</a>", "<style>", "</style>", "<!--", "-->", "<b>", "&nbsp;", "&amp;")
# A multipart body's lines (boundary "b"): delimiters and near-delimiters, part headers,
# transfer encodings and their broken forms, encoded words, calendar and HTML parts.
MIME_PIECES = (
    "--b", "--b--", "--bx", "--b ", "Content-Type: text/plain", "Content-Type: text/html",
    "Content-Type: multipart/mixed; boundary=b", "Content-Type: multipart/alternative; "
    "boundary=b", "Content-Type: message/rfc822", "Content-Type: text/calendar",
    "Content-Type: text/plain; charset=utf-7", "Content-Type: text/plain; charset=punycode",
    "Content-Type: application/octet-stream; name*0*=utf-8''a%20; name*1=b",
    "Content-Transfer-Encoding: base64", "Content-Transfer-Encoding: quoted-printable",
    "Content-Disposition: attachment; filename=a.eml", "Content-Disposition: inline",
    "Subject: =?utf-8?q?a=C3=A9?= =?utf-8?b?YWJj?=", "From: a@x.org", "Content-ID: <c>",
    "YWJjZGVm", "Y W J j", "!@#$", "=3D=20", "a=", "=ZZ", "begin 644 a.txt", "M86)C9&5F",
    "end", "BEGIN:VCALENDAR", "BEGIN:VEVENT", "UID:1", "DTSTART:20260101T100000Z",
    "END:VEVENT", "<p>x", "<br>", "+AGEAYgBj-", "x", "Hello there words", "", "\r", "\x00")
SEPARATORS = ("\n", " ", "\n\n", "")
MIB = 1 << 20


class _TooLong(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _TooLong


def random_unit(draw: random.Random, kind: str) -> str:
    """One to four pieces joined by one separator, ending with a line break or it."""
    pieces = {"text": PIECES, "html": PIECES + HTML_PIECES, "mime": MIME_PIECES}[kind]
    unit = [draw.choice(pieces) for _ in range(draw.randrange(1, 5))]
    separator = draw.choice(SEPARATORS)
    text = separator.join(unit) + draw.choice(("\n", separator))
    return text if text.strip() else "x" + text         # (a blank unit is no shape)


_CONTENT_TYPES = {"text": "text/plain; charset=utf-8", "html": "text/html; charset=utf-8",
                  "mime": "multipart/mixed; boundary=b"}


def message(unit: str, size: int, kind: str) -> bytes:
    """``unit`` repeated to about ``size`` bytes, under a reply's header (``kind``: the
    body is a text, an HTML or a multipart part)."""
    count = max(1, size // len(unit.encode()))
    opening = "--b\nContent-Type: text/plain\n\nWords above.\n" if kind == "mime" \
        else "Words above.\n"
    return (f"From: x@example.org\nSubject: Re: t\nMessage-ID: <1@example.org>\n"
            f"Content-Type: {_CONTENT_TYPES[kind]}\n\n").encode() + \
        (opening + unit * count).encode()


def cost(raw: bytes, limit: float) -> float | None:
    """CPU seconds of one analysis of ``raw``; None past ``limit`` seconds."""
    from mailfilter.config import FingerprintSettings
    from mailfilter.engine import analyse
    signal.setitimer(signal.ITIMER_REAL, limit)
    started = time.process_time()
    try:
        analyse(raw, FingerprintSettings())
    except _TooLong:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    return time.process_time() - started


_IN_A_PROCESS = r'''
import json, signal, sys
sys.path[:0] = [sys.argv[1], sys.argv[1] + "/bench"]
import cost_search
signal.signal(signal.SIGALRM, cost_search._alarm)
from mailfilter.config import FingerprintSettings
from mailfilter.engine import analyse
analyse(b"Subject: warm-up\n\nhello\n", FingerprintSettings())
raw = cost_search.message(sys.argv[2], int(sys.argv[3]), sys.argv[4])
seconds = cost_search.cost(raw, float(sys.argv[5]))
with open("/proc/self/status") as status:
    peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
print(json.dumps([seconds, peak / 1024]))
'''


def cost_in_a_process(unit: str, size: int, kind: str, limit: float
                      ) -> tuple[float | None, float]:
    """(CPU seconds or None past ``limit``, peak RSS MB) of one analysis in a new process."""
    done = subprocess.run([sys.executable, "-c", _IN_A_PROCESS, str(ROOT), unit, str(size),
                           kind, str(limit)],
                          capture_output=True, text=True, timeout=limit + 120, check=True)
    seconds, peak = json.loads(done.stdout)
    return seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--shapes", type=int, default=300, help="shapes drawn (default 300)")
    parser.add_argument("--size", type=int, default=256 * 1024,
                        help="bytes a shape's message is searched at (default 256 KiB)")
    parser.add_argument("--top", type=int, default=6, help="shapes measured again at 1 and "
                        "4 MiB (default 6)")
    kinds = parser.add_mutually_exclusive_group()
    kinds.add_argument("--html", action="store_true", help="the units as an HTML part")
    kinds.add_argument("--mime", action="store_true",
                       help="the units as a multipart body (boundary b): delimiters, part "
                       "headers, encoded bodies")
    parser.add_argument("--limit", type=float, default=30.0,
                        help="seconds an analysis may take before it is cut off")
    parser.add_argument("--deadline", type=float, default=2.0,
                        help="seconds past which a shape at 4 MiB is marked (default 2)")
    parser.add_argument("--memory", type=float, default=200.0,
                        help="peak MB past which a shape at 4 MiB is marked (default 200)")
    args = parser.parse_args()
    kind = "html" if args.html else "mime" if args.mime else "text"
    from mailfilter.config import FingerprintSettings
    from mailfilter.engine import analyse
    analyse(b"Subject: warm-up\n\nhello\n", FingerprintSettings())      # imports, patterns
    signal.signal(signal.SIGALRM, _alarm)
    draw = random.Random(args.seed)
    found: dict[str, float] = {}
    for _ in range(args.shapes):
        unit = random_unit(draw, kind)
        if unit in found:
            continue
        raw = message(unit, args.size, kind)
        seconds = cost(raw, args.limit)
        found[unit] = float("inf") if seconds is None else seconds / len(raw) * 1024 * 1e6
    ranked = sorted(found.items(), key=lambda item: -item[1])[:args.top]
    print(f"{len(found)} shapes of {args.size // 1024} KiB (seed {args.seed}"
          f"{'' if kind == 'text' else ', ' + kind.upper()}); the costliest again at 1 "
          "and 4 MiB:")
    print(f"{'µs/KB':>8} {'at 1 MiB':>9} {'at 4 MiB':>9} {'4 MiB s':>8} {'peak MB':>8}  unit")
    flagged = 0
    for unit, per_kb in ranked:
        raw = message(unit, MIB, kind)
        seconds = cost(raw, args.limit)
        at_1 = float("inf") if seconds is None else seconds / len(raw) * 1024 * 1e6
        seconds_4, peak = cost_in_a_process(unit, 4 * MIB, kind, args.limit)
        size_4 = len(message(unit, 4 * MIB, kind))
        at_4 = float("inf") if seconds_4 is None else seconds_4 / size_4 * 1024 * 1e6
        marks = []
        if per_kb and at_4 / per_kb > 2:
            marks.append("grows faster than its input")
        if seconds_4 is None or seconds_4 > args.deadline:
            marks.append("past the deadline")
        if peak > args.memory:
            marks.append("too much memory")
        flagged += bool(marks)
        shown = "over" if seconds_4 is None else f"{seconds_4:.2f}"
        print(f"{per_kb:8.1f} {at_1:9.1f} {at_4:9.1f} {shown:>8} {peak:8.0f}  {unit!r}"
              + (f"  <- {', '.join(marks)}" if marks else ""))
    print(f"shapes marked: {flagged}")


if __name__ == "__main__":
    main()
