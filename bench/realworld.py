"""Hard negatives and hard positives from real mail formats: dupfilter against four baselines.

Method.  Each *case* is an ordered sequence of 2-6 raw RFC 5322 messages (LF line ends, full
headers: trace fields, From/To/Subject/Date/Message-ID, MIME, In-Reply-To/References for
replies, List-* for list mail) with, per message, the envelope sender, the envelope
recipients and an expectation: ``unique`` (must not be called a duplicate or near-duplicate),
``flag`` (must be called one) or none (not judged: the first message).  Every case is
delivered, in order, to a FRESH store.  Bodies are real text from the shared SpamAssassin
corpus (ham paragraphs, sentences, thread subjects, whole ham messages); the rest follows
real formats (bench/realworld_mail.py, bench/realworld_templates.py).  Generation is
deterministic from ``--seed``: case *i* of category *c* is built from its own random source.

Categories (bench/realworld_cases.py, one function each; ``--category`` picks some):

must stay unique (every judged message):
  calendar_invitations        Teams/Zoom/Meet/room invitations of one organiser (Exchange and
                              Google layouts with text/calendar parts), updates (same UID,
                              higher SEQUENCE, new time), cancellations, attendee replies
  shared_disclaimer           different notes (from "Approved." to several paragraphs) of one
                              organisation's people, sharing a long disclaimer and/or an
                              external-mail banner, some with the same tiny signature logo,
                              some replies quoting the owner's earlier message
  transactional               one template, other data: reset links and codes, one-time codes,
                              sign-in alerts, orders, shipping and carrier notices, GitHub
                              Actions/GitLab/Jenkins failures, Nagios/Alertmanager/Zabbix
                              alerts, Stripe receipts, Xero invoices, card alerts
  short_replies               "Thanks!", "+1", "👍" from different people in different threads,
                              with their own quoted original, a signature, or nothing
  cron_reports                df -h, apticron, logwatch, borg, certbot, cron-apt,
                              unattended-upgrades of one host on later days (output changed)
  quoted_replies              new text (1-5 lines) above, below or between the whole quoted
                              original: Outlook (modern, Original Message, OWA, iOS), Gmail,
                              Apple Mail, iPhone, Thunderbird, inline, broken re-wrapping
  newsletters_different_issues  issues of one Mailchimp/Substack/HubSpot newsletter, Mailman
                              digest or retail promotion (same masthead and footer)
must be flagged (every judged message):
  attachment_resend           the same PDF/DOCX/XLSX/ZIP (20 KB - 2 MB) under a new 15-60 word
                              cover note, and in a third of the cases once more renamed
  short_resend                a note of under 12 words re-sent: unchanged, one line added, or
                              forwarded with one line
  list_crosspost              one post via 2-3 lists: Mailman 2/3 (also the footer as its own
                              MIME part), LISTSERV, Google Groups, ezmlm, Yahoo, Groups.io, Sympa
  alias_newsletter            one newsletter to two or three addresses of one person, recipient
                              scope, an aliases map (``detector.aliases`` when the setting exists)
  resends_and_reencodings     redelivery with a new Message-ID, QP/base64/8-bit Latin-1,
                              plain → HTML alternative or HTML only, CRLF, inline forwards to
                              oneself (Gmail/Outlook/Apple/Thunderbird), typo edits, the same
                              invitation (UID and SEQUENCE) sent again
  templated_same_data         a retried notification with the same data, the same cron output
  gateway_and_attached_copies the same message with its links rewritten by a security gateway
                              (Safe Links, URL Defense v2/v3, Mimecast), or forwarded whole as
                              an attachment (message/rfc822, an .eml file) under a note

More categories in bench/realworld_news.py (the recall issue's situations; must stay unique:
tracker_status_updates, disclaimer_short_notes, subject_only_data, bulk_notices_with_data,
own_message_additions, tracker_comments, short_fact_changes (a short note sent again with a
day, time, room, decision or negation changed); must be flagged: campaign_copies,
note_over_original, resent_under_new_subject, campaign_tracked_copies,
resend_notes_languages, follow_up_notes, corrected_resend (the same note with 1-3 words of
its wording corrected)).

Methods, each with a fresh state per case: dupfilter (``Engine.check`` with recording, LMDB
in a temporary folder, default settings plus ``--set``; ``detector.aliases`` is set to a
file written for the case when the setting exists); ``message-id`` (flag a Message-ID seen
before in the case); ``jaccard-5gram`` (exact resemblance ≥ 0.5 of lowercased ``[^\\W_]+``
word 5-grams to any earlier message, over the decoded text/plain and text/html parts that
are not attachments, HTML reduced to text by stripping tags); ``minhash-lsh`` (datasketch
MinHash, 128 permutations, MinHashLSH threshold 0.5 over the same shingles: query, flag on
any hit, insert); ``rspamd-fuzzy`` (Rspamd's fuzzy_check, bench/peers/rspamd_peer.py: one
rspamd and Redis on loopback for the run, the storage emptied for each case; each message
is checked with ``/checkv2`` against the earlier ones, flagged when the stock rule's symbol
matches, then learned; envelope sender and recipients go with the request).

Output: a table per category (cases, judged messages, failing cases: "false positives" for
must-unique categories, "flagged" for must-flag ones), a summary table, then ``targets met:
yes|no`` and the last line ``flagged: x.xx; false positives: x.xx; worst: NAME`` for
dupfilter (pooled over cases; targets: every must-flag category ≥ 0.99 flagged, every
must-unique category ≤ 0.01 false positives; worst: the category furthest from its target).

    python bench/realworld.py [--seed 1] [--cases 30] [--category NAME ...] [--failures]
                              [--json | --json-out FILE] [--write DIR] [--set S.K=V ...]
                              [--no-baselines | --no-rspamd]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import email
import email.policy
import html
import http.client
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import busy_store  # noqa: E402  (bench/ is not a package)
import realworld_cases as rc  # noqa: E402
import realworld_corpus  # noqa: E402
from quality import apply_overrides  # noqa: E402  (the same --set as bench/quality.py)

from mailfilter.config import load_settings  # noqa: E402
from mailfilter.engine import Engine  # noqa: E402
from mailfilter.headers import verdict_value  # noqa: E402

if TYPE_CHECKING:
    from peers.rspamd_peer import RspamdFuzzy

    from mailfilter.store import Store

CORPUS_NAME = Path("shared") / "corpus" / "spamassassin.tar.gz"
# dupfilter-busy: dupfilter again, each case in a busy host's store (bench/busy_store.py).
METHODS = ("dupfilter", "dupfilter-busy", "message-id", "jaccard-5gram", "minhash-lsh",
           "rspamd-fuzzy")
DUPFILTER_METHODS = ("dupfilter", "dupfilter-busy")
TARGET_FLAGGED, TARGET_FALSE_POSITIVES = 0.99, 0.01
WORD = re.compile(r"[^\W_]+")
NGRAM = 5


def default_corpus() -> Path:
    """shared/corpus/spamassassin.tar.gz beside the checkout (or beside a parent of it)."""
    for parent in BENCH.parents:
        if (parent / CORPUS_NAME).is_file():
            return parent / CORPUS_NAME
    return BENCH.parents[1] / CORPUS_NAME


# -- results -------------------------------------------------------------------------------

@dataclass
class Outcome:
    """What one method said about one message."""

    expect: str | None
    verdict: str            # unique / duplicate / near-duplicate (dupfilter), unique / flag
    reason: str = ""
    score: float | None = None
    header: str = ""
    subject: str = ""
    sender: str = ""
    note: str = ""

    @property
    def flagged(self) -> bool:
        return self.verdict not in ("unique", "error")

    @property
    def right(self) -> bool:
        if self.expect is None:
            return True
        return self.flagged == (self.expect == rc.FLAG) and self.verdict != "error"


@dataclass
class CaseResult:
    category: str
    index: int
    format: str
    method: str
    outcomes: list[Outcome]
    error: str = ""

    @property
    def judged(self) -> int:
        return sum(o.expect is not None for o in self.outcomes)

    @property
    def passed(self) -> bool:
        return not self.error and all(o.right for o in self.outcomes)


@dataclass
class Row:
    """One method on one category."""

    category: str
    target: str
    method: str
    cases: int
    judged: int
    failed: int            # cases with a wrong judged message (or an error)
    errors: int
    judged_flagged: int
    reasons: dict[str, int] = field(default_factory=dict)
    formats: dict[str, list[int]] = field(default_factory=dict)   # format -> [failed, cases]

    @property
    def rate(self) -> float:
        """False-positive share (must-unique) or flagged share (must-flag) of cases."""
        if not self.cases:
            return 0.0
        bad = self.failed / self.cases
        return bad if self.target == rc.UNIQUE else 1.0 - bad

    @property
    def hits(self) -> int:
        return self.failed if self.target == rc.UNIQUE else self.cases - self.failed

    @property
    def distance(self) -> float:
        """How far from the target (positive: missed)."""
        if self.target == rc.UNIQUE:
            return self.rate - TARGET_FALSE_POSITIVES
        return TARGET_FLAGGED - self.rate


# -- baselines -----------------------------------------------------------------------------

_TAG = re.compile(r"<[^>]*>")
_DROP = re.compile(r"<(style|script|head)\b.*?</\1\s*>", re.IGNORECASE | re.DOTALL)


def body_text(raw: bytes) -> str:
    """The decoded text/plain and text/html parts (not attachments); HTML tag-stripped."""
    message = email.message_from_bytes(raw, policy=email.policy.default)
    texts = []
    for part in message.walk():
        if part.is_multipart() or part.get_content_maintype() != "text":
            continue
        if part.get_content_subtype() not in ("plain", "html") or \
                part.get_content_disposition() == "attachment":
            continue
        try:
            text = part.get_content()
        except (LookupError, ValueError, AssertionError):
            payload = part.get_payload(decode=True) or b""
            text = payload.decode("latin-1")
        if part.get_content_subtype() == "html":
            text = html.unescape(_TAG.sub(" ", _DROP.sub(" ", text)))
        texts.append(text)
    return "\n".join(texts)


def shingles(raw: bytes) -> set[tuple[str, ...]]:
    words = WORD.findall(body_text(raw).lower())
    if len(words) < NGRAM:
        return {tuple(words)} if words else set()
    return {tuple(words[i:i + NGRAM]) for i in range(len(words) - NGRAM + 1)}


def _message_id(raw: bytes) -> str | None:
    head = raw.split(b"\n\n", 1)[0].replace(b"\r\n", b"\n")
    match = re.search(rb"^message-id:\s*(.*(?:\n[ \t].*)*)", head, re.IGNORECASE | re.MULTILINE)
    if not match:
        return None
    return match.group(1).decode("latin-1").strip().lower() or None


def _header_info(raw: bytes) -> tuple[str, str]:
    message = email.message_from_bytes(raw.split(b"\n\n", 1)[0] + b"\n\n",
                                       policy=email.policy.default)
    try:
        return str(message.get("Subject", "")), str(message.get("From", ""))
    except (ValueError, TypeError, IndexError):
        return "", ""


def run_baselines(case: rc.Case, infos: list[tuple[str, str]],
                  sets: list[set[tuple[str, ...]]]) -> list[CaseResult]:
    from datasketch import MinHash, MinHashLSH

    results = []
    seen_ids: set[str] = set()
    outcomes = []
    for delivery, (subject, sender) in zip(case.deliveries, infos, strict=True):
        mid = _message_id(delivery.raw)
        flagged = mid is not None and mid in seen_ids
        if mid:
            seen_ids.add(mid)
        outcomes.append(Outcome(delivery.expect, "flag" if flagged else "unique",
                                subject=subject, sender=sender))
    results.append(CaseResult(case.category, case.index, case.format, "message-id", outcomes))

    outcomes = []
    for k, (delivery, (subject, sender)) in enumerate(zip(case.deliveries, infos, strict=True)):
        best = 0.0
        for earlier in sets[:k]:
            union = len(sets[k] | earlier)
            if union:
                best = max(best, len(sets[k] & earlier) / union)
        outcomes.append(Outcome(delivery.expect, "flag" if best >= 0.5 else "unique",
                                score=best, subject=subject, sender=sender))
    results.append(CaseResult(case.category, case.index, case.format, "jaccard-5gram", outcomes))

    lsh = MinHashLSH(threshold=0.5, num_perm=128)
    outcomes = []
    for k, (delivery, (subject, sender)) in enumerate(zip(case.deliveries, infos, strict=True)):
        hit = False
        if sets[k]:
            sketch = MinHash(num_perm=128)
            sketch.update_batch([" ".join(s).encode() for s in sets[k]])
            hit = bool(lsh.query(sketch))
            lsh.insert(str(k), sketch)
        outcomes.append(Outcome(delivery.expect, "flag" if hit else "unique",
                                subject=subject, sender=sender))
    results.append(CaseResult(case.category, case.index, case.format, "minhash-lsh", outcomes))
    return results


def rspamd_peer() -> ModuleType:
    """bench/peers/rspamd_peer.py, imported when the column is asked for; a clear error when
    rspamd or redis-server is missing."""
    peers = str(BENCH / "peers")
    if peers not in sys.path:
        sys.path.insert(0, peers)
    import rspamd_peer

    for program in (rspamd_peer.RSPAMD, rspamd_peer.REDIS_SERVER):
        if not Path(program).exists():
            raise SystemExit(f"{program} is missing: apt-get install rspamd redis-server "
                             "(or --no-rspamd)")
    return rspamd_peer


def run_rspamd(case: rc.Case, infos: list[tuple[str, str]], rspamd: RspamdFuzzy) -> CaseResult:
    """Rspamd's fuzzy_check on an emptied storage: each message checked against the earlier
    ones of the case, then learned (the write is in Redis before the next check)."""
    rspamd.reset()
    outcomes: list[Outcome] = []
    result = CaseResult(case.category, case.index, case.format, "rspamd-fuzzy", outcomes)
    for delivery, (subject, sender) in zip(case.deliveries, infos, strict=True):
        try:
            reply = rspamd.check(delivery.raw, learn=True, sender=delivery.sender,
                                 recipients=delivery.recipients)
        except (OSError, RuntimeError, http.client.HTTPException, ValueError) as error:
            result.error = f"{type(error).__name__}: {error}"
            outcomes.append(Outcome(delivery.expect, "error", reason=result.error,
                                    subject=subject, sender=sender, note=delivery.note))
            continue
        # Each option is flag:hash:probability:type; the types say what matched (txt: a text
        # part's shingles; bin: the digest of an attachment or of a short text; img).
        kinds = sorted({option.rsplit(":", 1)[-1] for option in reply.options})
        outcomes.append(Outcome(delivery.expect, "flag" if reply.matched else "unique",
                                reason="+".join(kinds), subject=subject, sender=sender,
                                note=delivery.note))
    return result


# -- dupfilter -----------------------------------------------------------------------------


def aliases_text(case: rc.Case) -> str:
    lines = ["# aliases of this case: ALIAS-ADDRESS  MAILBOX-ADDRESS (Postfix virtual(5)-like)",
             ""]
    lines += [f"{alias:<40} {mailbox}" for alias, mailbox in case.aliases]
    return "\n".join(lines) + "\n"


def aliases_supported() -> bool:
    return hasattr(load_settings(search=False).detector, "aliases")


def run_dupfilter(case: rc.Case, overrides: Sequence[str], infos: list[tuple[str, str]],
                  folder: Path, busy: Store | None = None) -> CaseResult:
    """The case delivered, in order, to a fresh LMDB store; with ``busy``, to that busy
    host's store, after 12 personalised copies of its first message went to other
    mailboxes, everything rolled back afterwards (bench/busy_store.py)."""
    outcomes: list[Outcome] = []
    result = CaseResult(case.category, case.index, case.format,
                        "dupfilter" if busy is None else "dupfilter-busy", outcomes)
    store = folder / "store"
    try:
        settings = load_settings(search=False)
        apply_overrides(settings, [f"{k}={v}" for k, v in case.settings.items()])
        apply_overrides(settings, overrides)
        if case.aliases and hasattr(settings.detector, "aliases"):
            path = folder / "aliases"
            path.write_text(aliases_text(case), encoding="utf-8")
            settings.detector.aliases = str(path)
        engine = Engine(settings, str(store)) if busy is None else Engine(settings, store=busy)
    except Exception as error:  # noqa: BLE001  (reported per case, not a crash)
        result.error = f"{type(error).__name__}: {error}"
        return result
    if busy is not None:
        busy_store.case_in(engine, case.deliveries[0].raw,
                           lambda: _deliver(engine, case, infos, outcomes, result))
        return result
    try:
        _deliver(engine, case, infos, outcomes, result)
    finally:
        engine.close()
        shutil.rmtree(store, ignore_errors=True)
    return result


def _deliver(engine: Engine, case: rc.Case, infos: list[tuple[str, str]],
             outcomes: list[Outcome], result: CaseResult) -> None:
    """The case's messages through ``engine``, in order, each one's outcome kept."""
    for delivery, (subject, sender) in zip(case.deliveries, infos, strict=True):
        try:
            verdict = engine.check(delivery.raw, delivery.recipients, sender=delivery.sender)
        except Exception as error:  # noqa: BLE001
            result.error = f"{type(error).__name__}: {error}"
            outcomes.append(Outcome(delivery.expect, "error", reason=result.error,
                                    subject=subject, sender=sender, note=delivery.note))
            continue
        outcomes.append(Outcome(delivery.expect, str(verdict.kind), verdict.measure or "",
                                verdict.score, verdict_value(verdict), subject, sender,
                                delivery.note))


# -- evaluation ----------------------------------------------------------------------------

@dataclass
class Report:
    seed: int
    cases_per_category: int
    settings: list[str]
    code: str
    aliases_setting: bool
    rows: list[Row]
    results: list[CaseResult]
    seconds: dict[str, float]

    def row(self, category: str, method: str) -> Row | None:
        return next((r for r in self.rows if r.category == category and r.method == method),
                    None)

    def categories(self) -> list[str]:
        return list(dict.fromkeys(r.category for r in self.rows))

    def pooled(self, method: str, target: str) -> tuple[int, int]:
        """(hits, cases): flagged cases of must-flag, failed cases of must-unique."""
        rows = [r for r in self.rows if r.method == method and r.target == target]
        return sum(r.hits for r in rows), sum(r.cases for r in rows)

    def worst(self, method: str = "dupfilter") -> str:
        rows = [r for r in self.rows if r.method == method]
        return max(rows, key=lambda r: r.distance).category if rows else ""

    def targets_met(self, methods: Sequence[str] = DUPFILTER_METHODS) -> bool:
        return all(r.distance <= 1e-12 for r in self.rows if r.method in methods)


def summarise(category: str, target: str, method: str, results: list[CaseResult]) -> Row:
    row = Row(category, target, method, len(results), sum(r.judged for r in results),
              sum(not r.passed for r in results), sum(bool(r.error) for r in results),
              sum(o.flagged for r in results for o in r.outcomes if o.expect is not None))
    reasons: collections.Counter[str] = collections.Counter(
        o.reason or o.verdict for r in results for o in r.outcomes
        if o.expect is not None and o.flagged)
    row.reasons = dict(reasons.most_common())
    formats: dict[str, list[int]] = {}
    for r in results:
        entry = formats.setdefault(r.format, [0, 0])
        entry[0] += not r.passed
        entry[1] += 1
    row.formats = dict(sorted(formats.items()))
    return row


def evaluate(pool: realworld_corpus.TextPool, *, seed: int = 1, cases: int = 30,
             categories: Sequence[str] | None = None, overrides: Sequence[str] = (),
             baselines: bool = True, rspamd: bool = True, write: Path | None = None,
             progress: bool = False,
             busy: tuple[Sequence[bytes], Sequence[bytes]] | None = None) -> Report:
    """Every case of the chosen categories through dupfilter and, with ``baselines``, the
    three simple baselines and (with ``rspamd``) Rspamd's fuzzy_check; with ``busy`` (the
    corpus's ham and spam), through dupfilter in a busy host's store too."""
    ctx = rc.Context(pool, seed)
    names = list(categories or rc.CATEGORIES)
    rows: list[Row] = []
    results: list[CaseResult] = []
    seconds = {"build": 0.0, "dupfilter": 0.0, "baselines": 0.0}
    with tempfile.TemporaryDirectory(prefix="dupfilter-realworld-") as tmp, \
            contextlib.ExitStack() as servers:
        busy_engine = None
        if busy is not None:
            started = time.perf_counter()
            settings = load_settings(search=False)
            apply_overrides(settings, overrides)
            built = busy_store.build(Path(tmp), settings, *busy, seed=seed)
            busy_engine = servers.enter_context(Engine(settings, str(built.location)))
            seconds["busy store"] = time.perf_counter() - started
            seconds["dupfilter-busy"] = 0.0
        fuzzy = None
        if baselines and rspamd:
            seconds["rspamd"] = 0.0
            started = time.perf_counter()
            fuzzy = servers.enter_context(rspamd_peer().RspamdFuzzy(Path(tmp) / "rspamd"))
            seconds["rspamd start"] = time.perf_counter() - started
        for name in names:
            category = rc.CATEGORIES[name]
            started = time.perf_counter()
            built = category.build(ctx, cases)
            seconds["build"] += time.perf_counter() - started
            if write is not None:
                write_cases(write, category, built)
            per_method: dict[str, list[CaseResult]] = {m: [] for m in METHODS}
            for case in built:
                infos = [_header_info(d.raw) for d in case.deliveries]
                folder = Path(tmp) / f"{name}-{case.index}"
                folder.mkdir()
                started = time.perf_counter()
                per_method["dupfilter"].append(run_dupfilter(case, overrides, infos, folder))
                seconds["dupfilter"] += time.perf_counter() - started
                if busy_engine is not None:
                    started = time.perf_counter()
                    per_method["dupfilter-busy"].append(run_dupfilter(
                        case, overrides, infos, folder, busy_engine.store))
                    seconds["dupfilter-busy"] += time.perf_counter() - started
                if baselines:
                    started = time.perf_counter()
                    sets = [shingles(d.raw) for d in case.deliveries]
                    for result in run_baselines(case, infos, sets):
                        per_method[result.method].append(result)
                    seconds["baselines"] += time.perf_counter() - started
                if fuzzy is not None:
                    started = time.perf_counter()
                    per_method["rspamd-fuzzy"].append(run_rspamd(case, infos, fuzzy))
                    seconds["rspamd"] += time.perf_counter() - started
                shutil.rmtree(folder, ignore_errors=True)
            for method in METHODS:
                if per_method[method]:
                    rows.append(summarise(name, category.target, method, per_method[method]))
                    results.extend(per_method[method])
            if progress:
                row = rows[-len([m for m in METHODS if per_method[m]])]
                print(f"  {name}: {row.rate:.2f}", file=sys.stderr)
    return Report(seed, cases, list(overrides), code_state(), aliases_supported(), rows,
                  results, seconds)


def write_cases(folder: Path, category: rc.Category, built: list[rc.Case]) -> None:
    """Each case as numbered .eml files plus case.json (envelopes, expectations, aliases)."""
    for case in built:
        where = folder / category.name / f"{case.index:03d}"
        where.mkdir(parents=True, exist_ok=True)
        messages = []
        for k, delivery in enumerate(case.deliveries, 1):
            file = f"{k:02d}.eml"
            (where / file).write_bytes(delivery.raw)
            messages.append({"file": file, "envelope_sender": delivery.sender,
                             "recipients": delivery.recipients, "expect": delivery.expect,
                             "note": delivery.note})
        meta = {"category": category.name, "index": case.index, "format": case.format,
                "target": category.target, "messages": messages,
                "aliases": [list(a) for a in case.aliases], "settings": case.settings}
        if case.aliases:
            (where / "aliases").write_text(aliases_text(case), encoding="utf-8")
            meta["aliases_file"] = "aliases"
        (where / "case.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n",
                                         encoding="utf-8")


def code_state() -> str:
    """The commit of the mailfilter package measured (the one imported), and whether its
    mailfilter/ had uncommitted changes."""
    import mailfilter

    root = Path(mailfilter.__file__).resolve().parent.parent
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                "mailfilter"], capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"mailfilter from {root} (not a git checkout)"
    where = "" if root == BENCH.parent else f" (mailfilter from {root})"
    return head + (" + uncommitted changes in mailfilter/" if dirty else "") + where


# -- output --------------------------------------------------------------------------------

def _cell(row: Row | None) -> str:
    if row is None:
        return "-"
    return f"{row.rate:.2f} ({row.hits}/{row.cases})"


def render(report: Report, failures: bool = False) -> str:
    out: list[str] = []
    for name in report.categories():
        first = report.row(name, "dupfilter")
        assert first is not None
        kind = "must stay unique" if first.target == rc.UNIQUE else "must be flagged"
        column = "false positives" if first.target == rc.UNIQUE else "flagged"
        out.append(f"\n{name} ({kind})")
        out.append(f"  {'method':<15} {'cases':>5} {'judged':>6}  {column:<16} "
                   f"{'judged msgs flagged':>19}  errors")
        for method in METHODS:
            row = report.row(name, method)
            if row is None:
                continue
            out.append(f"  {method:<15} {row.cases:>5} {row.judged:>6}  {_cell(row):<16} "
                       f"{row.judged_flagged:>11}/{row.judged:<7}  {row.errors}")
        if first.reasons:
            out.append("  dupfilter reasons: " + ", ".join(f"{k} {v}"
                                                          for k, v in first.reasons.items()))
        fuzzy = report.row(name, "rspamd-fuzzy")
        if fuzzy is not None and fuzzy.reasons:
            out.append("  rspamd-fuzzy matches (txt: shingles, bin: a digest): " + ", ".join(
                f"{k} {v}" for k, v in fuzzy.reasons.items()))
        out.append("  dupfilter failing cases by format: " + ", ".join(
            f"{k} {v[0]}/{v[1]}" for k, v in first.formats.items()))
    out.append("\nsummary: false positives (must-unique) / flagged (must-flag), share of cases")
    methods = [m for m in METHODS if any(r.method == m for r in report.rows)]
    out.append(f"  {'category':<30} {'target':<10}" + "".join(f" {m:>17}" for m in methods))
    for name in report.categories():
        first = report.row(name, "dupfilter")
        assert first is not None
        target = "≤ 0.01 FP" if first.target == rc.UNIQUE else "≥ 0.99"
        out.append(f"  {name:<30} {target:<10}" + "".join(
            f" {_cell(report.row(name, m)):>17}" for m in methods))
    for target, label in ((rc.FLAG, "flagged (pooled)"), (rc.UNIQUE, "false positives (pooled)")):
        cells = []
        for m in methods:
            hits, total = report.pooled(m, target)
            cells.append(f" {(f'{hits / total:.2f} ({hits}/{total})' if total else '-'):>17}")
        out.append(f"  {label:<41}" + "".join(cells))
    if failures:
        out.append("\ndupfilter failures (in a busy store: marked busy)")
        for result in report.results:
            if not result.method.startswith("dupfilter") or result.passed:
                continue
            where = " busy" if result.method != "dupfilter" else ""
            out.append(f"- {result.category} #{result.index} [{result.format}]{where}"
                       + (f" error: {result.error}" if result.error else ""))
            for k, o in enumerate(result.outcomes, 1):
                mark = "  " if o.right else "✗ "
                out.append(f"  {mark}{k}. expect={o.expect or '-'} got={o.verdict} | "
                           f"From: {o.sender} | Subject: {o.subject[:70]}")
                if o.header and (o.flagged or not o.right):
                    out.append(f"       X-Dupfilter: {o.header}")
    hits, total = report.pooled("dupfilter", rc.FLAG)
    flagged = hits / total if total else 1.0
    hits, total = report.pooled("dupfilter", rc.UNIQUE)
    false_positives = hits / total if total else 0.0
    out.append("")
    out.append(f"seed {report.seed}, {report.cases_per_category} cases per category, code "
               f"{report.code}; settings overrides: {', '.join(report.settings) or 'none'}; "
               f"detector.aliases setting: {'yes' if report.aliases_setting else 'absent'}; "
               f"seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in report.seconds.items()))
    out.append(f"targets met: {'yes' if report.targets_met() else 'no'}")
    out.append(f"flagged: {flagged:.2f}; false positives: {false_positives:.2f}; "
               f"worst: {report.worst()}")
    return "\n".join(out).lstrip("\n")


def as_json(report: Report) -> str:
    rows = []
    for r in report.rows:
        item = asdict(r)
        item["rate"] = round(r.rate, 4)
        item["hits"] = r.hits
        rows.append(item)
    cases = []
    for result in report.results:
        if result.method != "dupfilter":
            continue
        cases.append({"category": result.category, "index": result.index,
                      "format": result.format, "passed": result.passed, "error": result.error,
                      "messages": [{"expect": o.expect, "verdict": o.verdict,
                                    "reason": o.reason, "score": o.score, "header": o.header,
                                    "subject": o.subject, "from": o.sender, "note": o.note}
                                   for o in result.outcomes]})
    hits, total = report.pooled("dupfilter", rc.FLAG)
    fp_hits, fp_total = report.pooled("dupfilter", rc.UNIQUE)
    return json.dumps({
        "seed": report.seed, "cases_per_category": report.cases_per_category,
        "settings": report.settings, "code": report.code,
        "aliases_setting": report.aliases_setting, "seconds": report.seconds,
        "flagged": round(hits / total, 4) if total else None,
        "false_positives": round(fp_hits / fp_total, 4) if fp_total else None,
        "worst": report.worst(), "targets_met": report.targets_met(),
        "rows": rows, "dupfilter_cases": cases}, indent=2, ensure_ascii=False)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=default_corpus())
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cases", type=int, default=30, help="cases per category")
    parser.add_argument("--category", action="append", default=[], metavar="NAME",
                        choices=list(rc.CATEGORIES), help="only this category (repeatable)")
    parser.add_argument("--failures", action="store_true",
                        help="print every case dupfilter got wrong, message by message")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--json-out", type=Path, default=None,
                        help="also write the machine-readable report to this file")
    parser.add_argument("--write", type=Path, default=None, metavar="DIR",
                        help="write each case as DIR/CATEGORY/NNN/*.eml plus case.json")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a dupfilter setting, e.g. detector.min_words=20")
    parser.add_argument("--no-baselines", action="store_true",
                        help="run dupfilter only")
    parser.add_argument("--no-rspamd", action="store_true",
                        help="leave out the Rspamd column (which needs the Debian packages "
                             "rspamd and redis-server)")
    parser.add_argument("--progress", action="store_true", help="one line per category "
                        "on stderr")
    parser.add_argument("--mode", choices=("empty", "both"), default="both",
                        help="each case in a fresh store only, or also in a busy host's "
                             "store (bench/busy_store.py), side by side (the default)")
    args = parser.parse_args(argv)
    apply_overrides(load_settings(search=False), args.set)   # a bad --set fails here
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="dupfilter-corpus-") as folder:
        pool = realworld_corpus.load(args.corpus, Path(folder))
        busy = busy_store.corpus_messages(Path(folder)) if args.mode != "empty" else None
    loading = time.perf_counter() - started
    report = evaluate(pool, seed=args.seed, cases=args.cases,
                      categories=args.category or None, overrides=args.set,
                      baselines=not args.no_baselines, rspamd=not args.no_rspamd,
                      write=args.write, progress=args.progress, busy=busy)
    report.seconds = {"corpus": loading, **report.seconds,
                      "total": time.perf_counter() - started}
    if args.json_out:
        args.json_out.write_text(as_json(report) + "\n", encoding="utf-8")
    print(as_json(report) if args.json else render(report, failures=args.failures))
    return 0 if report.targets_met() else 1


if __name__ == "__main__":
    sys.exit(main())
