"""Detection quality on realistic variants of real messages (the issue's targets).

The corpus tarball is unpacked into a temporary folder.  N originals (seeded) are stored in
a fresh LMDB store; then, checked with ``record=False`` against that store:

* one variant of each kind in ``bench/variants.py`` per original (resent copies, list
  footers, re-wrapping, QP/base64, HTML alternatives, CRLF, edited words, inline forwards,
  truncation, changed signatures): the share called duplicate or near-duplicate is recall;
* unrelated messages: other corpus messages whose exact shingle resemblance to every stored
  original is below 0.2 and whose canonical text is not identical to one (the corpus has
  real crossposts and spam campaigns).  Two more views of the same pool: the raw sample
  (no filter at all: its "called" rate includes true duplicates), and "content": the raw
  sample's messages whose resemblance to every original stays below 0.2 once boilerplate
  shingles (found in more than 25 corpus messages: sponsor blocks, mastheads, footers) are
  left out.  These share at most boilerplate with an original, so calling one a
  near-duplicate is a false positive the first filter cannot see;
* quoted replies: new text above or below the whole original quoted (``> ``), Outlook's
  unquoted "Original Message" style, and HTML ``<blockquote>``.

Targets: recall ≥ 97% overall and ≥ 90% per kind; ≤ 0.5% of unrelated messages and ≤ 2% of
quoted replies called duplicate or near-duplicate.

    python bench/quality.py [--originals 1000] [--seed 1] [--threshold T] [--sweep] [--json]
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from mailfilter.config import Settings, load_settings
from mailfilter.detector import Verdict
from mailfilter.engine import Analysis, Engine, remember
from mailfilter.fingerprint import shingle_hashes, tokenize
from mailfilter.message import parse
from mailfilter.similarity import containment, resemblance

BENCH = Path(__file__).resolve().parent
for folder in (BENCH, BENCH.parent):    # variants (bench/ is not a package); tests.support
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import busy_store  # noqa: E402
import variants  # noqa: E402

from tests.support import corpus as shared_corpus  # noqa: E402

TARGET_OVERALL, TARGET_PER_KIND = 0.98, 0.93
TARGET_UNRELATED, TARGET_REPLIES = 0.002, 0.0
UNRELATED_BELOW = 0.2
BOILERPLATE_DF = 25   # a shingle in more corpus messages than this is boilerplate
SWEEP = tuple(round(0.30 + 0.05 * i, 2) for i in range(11))
NOW = 1_030_000_000  # a fixed clock for the store: results do not depend on the day


@dataclass(frozen=True)
class Corpus:
    """The corpus's messages: (path relative to the corpus root, raw bytes), sorted."""

    messages: list[tuple[str, bytes]]


def read_corpus(folder: Path) -> Corpus:
    """Every message of the corpus unpacked in ``folder``."""
    files = shared_corpus.message_files(folder)
    root = next((p.parent.parent for p in files), folder)
    return Corpus([(str(p.relative_to(root)), p.read_bytes()) for p in files])


@dataclass
class Check:
    """One checked message: what it is, what the detector said, and the measures."""

    kind: str
    style: str
    source: str                   # the original it was made from ("" for unrelated)
    analysis: Analysis
    verdict: str = "unique"
    reason: str = ""
    score: float | None = None
    matched: str = ""             # corpus path of the matched original
    right: bool = False           # matched the very original it was made from
    source_found: bool = False    # the original was among the candidates weighed
    source_resemblance: float | None = None   # sketch estimate, if it was
    source_containment: float | None = None
    histogram_positions: int | None = None
    related: float = 0.0          # unrelated only: exact resemblance to the closest original
    # unrelated only, in a busy store: exact resemblance to the host's message it matched
    host_related: float = 0.0
    sample: bool = False          # unrelated only: in the raw (unfiltered) sample
    content_related: float = 0.0  # unrelated only: the same, boilerplate shingles left out
    raw: bytes = b""              # the variant itself (to measure misses)

    @property
    def called(self) -> bool:
        return self.verdict != "unique"


@dataclass
class Row:
    """One line of a result table."""

    kind: str
    count: int
    called: int
    duplicate: int
    near: int
    right: int
    reasons: dict[str, int]

    @property
    def rate(self) -> float:
        return self.called / self.count if self.count else 0.0


@dataclass
class Report:
    """Everything one evaluation measured."""

    settings: dict[str, object]
    originals: int
    seed: int
    rows: list[Row]
    styles: list[Row]
    recall: float
    unrelated: Row
    unrelated_raw: Row
    unrelated_content: Row
    replies: Row
    reply_styles: list[Row]
    misses: dict[str, list[dict[str, object]]]
    false_positives: dict[str, list[dict[str, object]]]
    sweep: list[dict[str, object]] = field(default_factory=list)
    seconds: float = 0.0
    code: str = ""
    # "empty": the originals in a fresh store; "busy": in a busy host's store (half the
    # corpus the evaluation draws from, the other half the host's traffic).
    mode: str = "empty"
    # busy only: negatives that matched the host's own copy of them (the corpus holds
    # copies: cross-posts, campaigns), left out of the unrelated sets
    host_copies: int = 0

    def targets_met(self) -> list[str]:
        """The targets that are missed, worded for a test failure (empty: all met)."""
        failed = []
        if self.recall < TARGET_OVERALL:
            failed.append(f"overall recall {self.recall:.2%} < {TARGET_OVERALL:.0%}")
        for row in self.rows:
            if row.rate < TARGET_PER_KIND:
                failed.append(f"{row.kind} recall {row.rate:.2%} < {TARGET_PER_KIND:.0%}")
        if self.unrelated.rate > TARGET_UNRELATED:
            failed.append(f"unrelated FP {self.unrelated.rate:.2%} > {TARGET_UNRELATED:.1%}")
        if self.replies.rate > TARGET_REPLIES:
            failed.append(f"quoted-reply FP {self.replies.rate:.2%} > {TARGET_REPLIES:.0%}")
        return failed


def code_state() -> str:
    """The commit measured, and whether mailfilter/ had uncommitted changes."""
    try:
        head = subprocess.run(["git", "-C", str(BENCH.parent), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(BENCH.parent), "status", "--porcelain",
                                "mailfilter"], capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" + uncommitted changes in mailfilter/" if dirty else "")


def _shingles(raw: bytes, ngram: int) -> set[int]:
    """Exact shingle set of a message's canonical text (no sketch sampling)."""
    return {int(h) for h in shingle_hashes(tokenize(parse(raw).text), ngram)}


class ShingleTable:
    """Exact shingle sets of every corpus message, and each shingle's document frequency.

    A shingle found in more than ``BOILERPLATE_DF`` corpus messages is boilerplate (list
    sponsor blocks, newsletter mastheads, footers the parser keeps): the *content* of a
    message is its shingles without those.
    """

    def __init__(self, corpus: Corpus, ngram: int) -> None:
        self.sets = [np.asarray(list(shingle_hashes(tokenize(parse(raw).text), ngram)),
                                dtype=np.uint64) for _, raw in corpus.messages]
        every = np.concatenate(self.sets) if self.sets else np.empty(0, dtype=np.uint64)
        self.values, self.counts = np.unique(every, return_counts=True)

    def full(self, number: int) -> set[int]:
        return set(self.sets[number].tolist())

    def content(self, number: int) -> set[int]:
        shingles = self.sets[number]
        frequency = self.counts[np.searchsorted(self.values, shingles)]
        return set(shingles[frequency <= BOILERPLATE_DF].tolist())


class _Index:
    """Shingle sets of the originals, inverted, for 'closest original' queries."""

    def __init__(self, shingle_sets: Sequence[set[int]]) -> None:
        self.sizes = [len(s) for s in shingle_sets]
        self.postings: dict[int, list[int]] = collections.defaultdict(list)
        for number, shingles in enumerate(shingle_sets):
            for value in shingles:
                self.postings[value].append(number)

    def closest(self, shingles: set[int]) -> float:
        """Highest exact resemblance of ``shingles`` to any original (0 if none shared)."""
        shared: collections.Counter[int] = collections.Counter()
        for value in shingles:
            shared.update(self.postings.get(value, ()))
        best = 0.0
        for number, inter in shared.items():
            best = max(best, inter / (len(shingles) + self.sizes[number] - inter))
        return best


def _judge(check: Check, verdict: Verdict, paths: dict[int, str], source_doc: int | None
           ) -> None:
    """Copy the verdict and the measures against the source original into ``check``."""
    check.verdict, check.reason, check.score = str(verdict.kind), verdict.measure, \
        verdict.score
    check.matched = paths.get(verdict.match.doc_id, "?") if verdict.match else ""
    check.right = verdict.match is not None and verdict.match.doc_id == source_doc
    check.source_found = False
    check.source_resemblance = check.source_containment = check.histogram_positions = None
    for item in verdict.evidence:
        if item.record.doc_id == source_doc:
            check.source_found = True
            check.source_resemblance = item.resemblance
            check.source_containment = item.containment
            check.histogram_positions = item.histogram_positions


def _row(kind: str, checks: Iterable[Check]) -> Row:
    checks = list(checks)
    called = [c for c in checks if c.called]
    return Row(kind=kind, count=len(checks), called=len(called),
               duplicate=sum(1 for c in called if c.verdict == "duplicate"),
               near=sum(1 for c in called if c.verdict == "near-duplicate"),
               right=sum(1 for c in called if c.right),
               reasons=dict(collections.Counter(c.reason for c in called).most_common()))


def _by(checks: Iterable[Check], key: str) -> dict[str, list[Check]]:
    groups: dict[str, list[Check]] = collections.defaultdict(list)
    for check in checks:
        groups[getattr(check, key)].append(check)
    return groups


def _cycle(items: Sequence[int], passes: int) -> Iterator[int]:
    for _ in range(passes):
        yield from items


class Evaluation:
    """Stores the originals, builds and checks every variant and negative message."""

    def __init__(self, corpus: Corpus, store_dir: Path, *, originals: int = 1000,
                 seed: int = 1, unrelated: int = 2000, replies: int | None = None,
                 per_kind: int | None = None, settings: Settings | None = None,
                 kinds: Sequence[str] | None = None,
                 traffic: dict[str, bytes] | None = None) -> None:
        self.corpus = corpus
        self.settings = settings or load_settings(search=False)
        self.seed = seed
        self.count = min(originals, len(corpus.messages) // 2)
        self.unrelated_count = unrelated
        self.replies_count = self.count if replies is None else replies
        self.per_kind = self.count if per_kind is None else per_kind
        self.kinds = list(kinds or variants.KINDS)
        chosen = random.Random(seed).sample(range(len(corpus.messages)), self.count)
        self.original_ids = chosen
        self.original_raw = {corpus.messages[i][0]: corpus.messages[i][1] for i in chosen}
        self.engine = Engine(self.settings, str(store_dir))
        # A busy store's own messages by Message-ID (bench/busy_store.py): an "unrelated"
        # message that matches one of them is measured against it.
        self.traffic = traffic or {}
        self.doc_of: dict[int, int] = {}     # corpus index → doc id
        self.path_of_doc: dict[int, str] = {}
        self.checks: list[Check] = []

    def close(self) -> None:
        self.engine.close()

    def _check(self, check: Check, source: int | None) -> Check:
        verdict = self.engine.decide(check.analysis, record=False)
        _judge(check, verdict, self.path_of_doc,
               self.doc_of.get(source) if source is not None else None)
        match = verdict.match
        if check.kind == "unrelated" and match is not None and check.raw \
                and match.doc_id not in self.path_of_doc and match.message_id in self.traffic:
            ngram = self.settings.fingerprint.ngram
            check.host_related = resemblance(_shingles(check.raw, ngram),
                                             _shingles(self.traffic[match.message_id], ngram))
        self.checks.append(check)
        return check

    def store_originals(self) -> None:
        for index in self.original_ids:
            path, raw = self.corpus.messages[index]
            recording = self.engine.process(self.engine.analyse(raw), (), remember,
                                            now=NOW).recording
            assert recording is not None
            doc = recording.doc_id
            self.doc_of[index] = doc
            self.path_of_doc.setdefault(doc, path)

    def make_variants(self, kind: str, wanted: int) -> None:
        """``wanted`` variants of ``kind``, from originals in a seeded order; an original
        the kind does not apply to is skipped (and the order is cycled if needed)."""
        rng = random.Random(f"{self.seed}:{kind}")
        order = list(self.original_ids)
        rng.shuffle(order)
        made = 0
        for index in _cycle(order, 3):
            if made >= wanted:
                break
            path, raw = self.corpus.messages[index]
            result = variants.make(kind, raw, rng)
            if result is None:
                continue
            data, style = result
            check = Check(kind=kind, style=style, source=path,
                          analysis=self.engine.analyse(data), raw=data)
            self._check(check, index)
            made += 1

    def make_unrelated(self) -> None:
        """Other corpus messages, in a seeded order.

        The first ``unrelated`` of them are the raw sample; the first ``unrelated`` whose
        exact resemblance to every original is below 0.2 (and whose text is not identical
        to one) are the unrelated set; the raw sample's messages whose *content*
        resemblance (boilerplate shingles left out) to every original is below 0.2 are the
        content-unrelated set: messages that share only list boilerplate with an original.
        """
        table = ShingleTable(self.corpus, self.settings.fingerprint.ngram)
        stored = set(self.original_ids)
        full = _Index([table.full(i) for i in self.original_ids])
        content = _Index([table.content(i) for i in self.original_ids])
        digests = {self.engine.analyse(self.corpus.messages[i][1]).fingerprint.digest
                   for i in self.original_ids}
        pool = [i for i in range(len(self.corpus.messages)) if i not in stored]
        random.Random(f"{self.seed}:unrelated").shuffle(pool)
        kept = 0
        for position, number in enumerate(pool):
            in_raw = position < self.unrelated_count
            if kept >= self.unrelated_count and not in_raw:
                break
            path, raw = self.corpus.messages[number]
            analysis = self.engine.analyse(raw)
            fp = analysis.fingerprint
            same_text = fp.digest in digests and (fp.word_count > 0 or fp.has_attachments)
            closest = 1.0 if same_text else full.closest(table.full(number))
            unrelated = closest < UNRELATED_BELOW and kept < self.unrelated_count
            if not (unrelated or in_raw):
                continue
            kept += unrelated
            check = Check(kind="unrelated", style="unrelated" if unrelated else "related",
                          source=path, analysis=analysis, related=closest, sample=in_raw,
                          raw=raw if self.traffic else b"")
            check.content_related = 1.0 if same_text else content.closest(
                table.content(number))
            self._check(check, None)

    def run(self) -> None:
        self.store_originals()
        for kind in self.kinds:
            self.make_variants(kind, self.per_kind)
        self.make_unrelated()
        self.make_variants("quoted_reply", self.replies_count)

    def recheck(self, threshold: float) -> None:
        """Decide every stored analysis again at another resemblance threshold."""
        self.engine.settings.detector.resemblance_threshold = threshold
        sources = {self.corpus.messages[i][0]: i for i in self.original_ids}
        checks, self.checks = self.checks, []
        for check in checks:
            self._check(check, sources.get(check.source))

    # -- results ---------------------------------------------------------------------

    def positives(self) -> list[Check]:
        return [c for c in self.checks if c.kind in self.kinds]

    def unrelated(self, raw: bool = False) -> list[Check]:
        """The unrelated set, or with ``raw`` the unfiltered sample."""
        return [c for c in self.checks if c.kind == "unrelated" and
                (c.sample if raw else c.style == "unrelated"
                 and c.host_related < UNRELATED_BELOW)]

    def content_unrelated(self) -> list[Check]:
        """The raw sample's messages sharing no more than boilerplate with any original."""
        return [c for c in self.unrelated(raw=True) if c.content_related < UNRELATED_BELOW
                and c.host_related < UNRELATED_BELOW]

    def replies(self) -> list[Check]:
        return [c for c in self.checks if c.kind == "quoted_reply"]

    def summary(self) -> dict[str, object]:
        """The headline numbers at the current threshold (one sweep line)."""
        positives = self.positives()
        per_kind = {kind: _row(kind, checks).rate for kind, checks in
                    _by(positives, "kind").items()}
        worst = min(per_kind, key=lambda k: per_kind[k]) if per_kind else ""
        return {
            "threshold": self.engine.settings.detector.resemblance_threshold,
            "recall": _row("all", positives).rate,
            "worst_kind": worst, "worst_recall": per_kind.get(worst, 0.0),
            "unrelated_fp": _row("unrelated", self.unrelated()).rate,
            "unrelated_raw_fp": _row("raw", self.unrelated(raw=True)).rate,
            "unrelated_content_fp": _row("content", self.content_unrelated()).rate,
            "reply_fp": _row("quoted_reply", self.replies()).rate,
            "per_kind": per_kind,
        }

    def _miss(self, check: Check) -> dict[str, object]:
        """Measures of a missed variant against its source, from the verdict evidence and
        exact shingle sets (recomputed here from the texts)."""
        ngram = self.settings.fingerprint.ngram
        source = self.original_raw[check.source]
        fp = check.analysis.fingerprint
        source_fp = self.engine.analyse(source).fingerprint
        mine = _shingles(check.raw, ngram)
        theirs = _shingles(source, ngram)
        return {
            "path": check.source, "style": check.style,
            "words": fp.word_count, "source_words": source_fp.word_count,
            "exact_resemblance": round(resemblance(mine, theirs), 3),
            "exact_containment": round(containment(theirs, mine), 3),
            "candidate": check.source_found,
            "sketch_resemblance": _round(check.source_resemblance),
            "histogram_positions": check.histogram_positions,
            "chars": fp.histogram_chars,
        }

    def report(self, worst: int = 10) -> Report:
        positives = self.positives()
        kinds = _by(positives, "kind")
        rows = [_row(kind, kinds[kind]) for kind in self.kinds if kind in kinds]
        styles = [_row(f"{kind}/{style}", checks) for kind in self.kinds if kind in kinds
                  for style, checks in sorted(_by(kinds[kind], "style").items())]
        misses: dict[str, list[dict[str, object]]] = {}
        for kind in self.kinds:
            missed = [self._miss(c) for c in kinds.get(kind, []) if not c.called]
            missed.sort(key=lambda m: (m["candidate"], m["exact_resemblance"]))
            if missed:
                misses[kind] = missed[:worst]
        false_positives: dict[str, list[dict[str, object]]] = {}
        for name, checks in (("unrelated", self.unrelated()),
                             ("unrelated_content", self.content_unrelated()),
                             ("unrelated_raw", self.unrelated(raw=True)),
                             ("quoted_reply", self.replies())):
            false_positives[name] = [
                {"path": c.source, "style": c.style, "verdict": c.verdict,
                 "reason": c.reason, "score": _round(c.score), "matched": c.matched,
                 "words": c.analysis.fingerprint.word_count,
                 "closest_exact_resemblance": _round(c.related),
                 "closest_content_resemblance": _round(c.content_related)}
                for c in checks if c.called][:worst * 2]
        replies = self.replies()
        return Report(
            settings={"resemblance_threshold":
                      self.engine.settings.detector.resemblance_threshold,
                      "min_words": self.settings.detector.min_words,
                      "ngram": self.settings.fingerprint.ngram,
                      "histogram_rule": self.settings.detector.histogram_rule,
                      "sketch_size": self.settings.fingerprint.sketch_size},
            originals=self.count, seed=self.seed, rows=rows, styles=styles,
            recall=_row("all", positives).rate,
            unrelated=_row("unrelated", self.unrelated()),
            unrelated_raw=_row("unrelated (raw sample)", self.unrelated(raw=True)),
            unrelated_content=_row("unrelated (content)", self.content_unrelated()),
            replies=_row("quoted_reply", replies),
            reply_styles=[_row(f"quoted_reply/{style}", checks)
                          for style, checks in sorted(_by(replies, "style").items())],
            host_copies=sum(1 for c in self.checks if c.kind == "unrelated"
                            and c.host_related >= UNRELATED_BELOW),
            misses=misses, false_positives=false_positives)


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def apply_overrides(settings: Settings, overrides: Iterable[str]) -> None:
    """``section.key=value`` settings overrides (value typed like the default)."""
    for item in overrides:
        name, _, text = item.partition("=")
        section, _, key = name.strip().partition(".")
        target = getattr(settings, section, None)
        if target is None or not hasattr(target, key) or not text:
            raise ValueError(f"bad override {item!r}: want section.key=value")
        current = getattr(target, key)
        value: object
        if isinstance(current, bool):
            value = text.lower() in ("1", "true", "yes", "on")
        elif isinstance(current, (int, float)):
            value = type(current)(text)
        else:
            value = text
        setattr(target, key, value)
    settings.validate()


def evaluate(corpus: Corpus, *, originals: int = 1000, seed: int = 1, unrelated: int = 2000,
             replies: int | None = None, per_kind: int | None = None,
             threshold: float | None = None, sweep: Sequence[float] = (),
             kinds: Sequence[str] | None = None, worst: int = 10,
             overrides: Sequence[str] = (), busy: bool = False) -> Report:
    """Run the whole evaluation in a temporary store; ``sweep`` re-decides at each value.

    ``busy``: the store first holds a busy host's traffic (bench/busy_store.py), made from
    one half of the corpus (seeded); the originals, variants and negatives come from the
    other half."""
    started = time.perf_counter()
    settings = load_settings(search=False)
    apply_overrides(settings, overrides)
    if threshold is not None:
        settings.detector.resemblance_threshold = threshold
    chosen = settings.detector.resemblance_threshold
    with tempfile.TemporaryDirectory(prefix="dupfilter-quality-") as folder:
        store, traffic = Path(folder) / "store", {}
        if busy:
            order = list(range(len(corpus.messages)))
            random.Random(f"{seed}:busy").shuffle(order)
            half = len(order) // 2
            host = [corpus.messages[i] for i in sorted(order[half:])]
            corpus = Corpus([corpus.messages[i] for i in sorted(order[:half])])
            built = busy_store.build(
                Path(folder), settings, [raw for path, raw in host if "ham" in path],
                [raw for path, raw in host if "spam" in path], seed=seed)
            store, traffic = built.location, built.by_message_id
        evaluation = Evaluation(corpus, store, originals=originals, traffic=traffic,
                                seed=seed, unrelated=unrelated, replies=replies,
                                per_kind=per_kind, settings=settings, kinds=kinds)
        try:
            evaluation.run()
            lines = []
            for value in sweep:
                evaluation.recheck(value)
                lines.append(evaluation.summary())
            if sweep:
                evaluation.recheck(chosen)
            report = evaluation.report(worst)
        finally:
            evaluation.close()
    report.sweep = lines
    report.seconds = time.perf_counter() - started
    report.code = code_state()
    report.mode = "busy" if busy else "empty"
    return report


# -- output ----------------------------------------------------------------------------

def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def _table(rows: Sequence[Row], title: str) -> list[str]:
    out = [f"| {title} | count | called | dup | near-dup | right original | by reason |",
           "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for row in rows:
        reasons = ", ".join(f"{k} {v}" for k, v in row.reasons.items()) or "-"
        out.append(f"| {row.kind} | {row.count} | {_pct(row.called, row.count)} | "
                   f"{row.duplicate} | {row.near} | {_pct(row.right, row.called)} | "
                   f"{reasons} |")
    return out


def render(report: Report, verbose: bool = True) -> str:
    """The report as Markdown tables."""
    lines = [f"code {report.code}; originals {report.originals}, seed {report.seed}, "
             f"settings {report.settings}, {report.seconds:.0f} s", ""]
    total = sum(r.count for r in report.rows)
    called = sum(r.called for r in report.rows)
    lines += _table(report.rows, "kind")
    lines.append(f"| **all variants** | {total} | **{_pct(called, total)}** | "
                 f"{sum(r.duplicate for r in report.rows)} | "
                 f"{sum(r.near for r in report.rows)} | "
                 f"{_pct(sum(r.right for r in report.rows), called)} | |")
    lines += ["", *_table([report.unrelated, report.unrelated_content, report.unrelated_raw,
                           report.replies, *report.reply_styles],
                          "negative set (called = false positive)")]
    if verbose:
        lines += ["", *_table(report.styles, "kind/style")]
    if report.sweep:
        lines += ["", "| threshold | recall | worst kind | unrelated FP | unrelated FP "
                  "(content) | raw sample called | reply FP |",
                  "| ---: | ---: | --- | ---: | ---: | ---: | ---: |"]
        for s in report.sweep:
            lines.append(f"| {s['threshold']:.2f} | {s['recall']:.2%} | "
                         f"{s['worst_kind']} {s['worst_recall']:.1%} | "
                         f"{s['unrelated_fp']:.2%} | {s['unrelated_content_fp']:.2%} | "
                         f"{s['unrelated_raw_fp']:.2%} | {s['reply_fp']:.2%} |")
    if verbose:
        for kind, missed in report.misses.items():
            lines += ["", f"worst misses: {kind}"]
            lines += [f"  {m}" for m in missed]
        for name, found in report.false_positives.items():
            if found:
                lines += ["", f"false positives: {name}"]
                lines += [f"  {f}" for f in found]
    if report.mode == "busy":
        lines += ["", f"{report.host_copies} negative messages matched a copy of themselves "
                  f"in the host's traffic (exact resemblance ≥ {UNRELATED_BELOW}) and are "
                  "not counted as unrelated"]
    failed = report.targets_met()
    lines += ["", "targets: " + ("all met" if not failed else "MISSED: " + "; ".join(failed))]
    return "\n".join(lines)


def as_json(report: Report, busy: Report | None = None) -> str:
    """The report as JSON (with ``busy``, the busy store's report under "busy")."""
    data = _data(report)
    if busy is not None:
        data["busy"] = _data(busy)
    return json.dumps(data, indent=2, default=str)


def _data(report: Report) -> dict[str, object]:
    data = asdict(report)
    for key in ("rows", "styles", "reply_styles"):
        for row, obj in zip(data[key], getattr(report, key), strict=True):
            row["rate"] = round(obj.rate, 4)
    for key in ("unrelated", "unrelated_raw", "unrelated_content", "replies"):
        data[key]["rate"] = round(getattr(report, key).rate, 4)
    data["targets_missed"] = report.targets_met()
    return data


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=shared_corpus.CORPUS_TARBALL)
    parser.add_argument("--originals", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--unrelated", type=int, default=2000)
    parser.add_argument("--replies", type=int, default=None,
                        help="quoted replies to check (default: one per original)")
    parser.add_argument("--per-kind", type=int, default=None,
                        help="variants per kind (default: one per original)")
    parser.add_argument("--threshold", type=float, default=None,
                        help="detector.resemblance_threshold (default: the config default)")
    parser.add_argument("--sweep", action="store_true",
                        help="also re-decide everything at thresholds 0.30 .. 0.80")
    parser.add_argument("--sweep-values", default=None,
                        help="comma-separated thresholds for --sweep instead")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override a setting, e.g. fingerprint.ngram=4 (repeatable)")
    parser.add_argument("--kinds", default=None, help="comma-separated subset of kinds")
    parser.add_argument("--worst", type=int, default=10, help="misses listed per kind")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--json-out", type=Path, default=None,
                        help="also write the machine-readable report to this file")
    parser.add_argument("--brief", action="store_true", help="tables only")
    parser.add_argument("--mode", choices=("empty", "busy", "both"), default="both",
                        help="the originals in a fresh store, in a busy host's store "
                             "(bench/busy_store.py), or both, side by side (the default)")
    args = parser.parse_args(argv)
    sweep: Sequence[float] = ()
    if args.sweep or args.sweep_values:
        sweep = tuple(float(v) for v in args.sweep_values.split(",")) \
            if args.sweep_values else SWEEP
    with tempfile.TemporaryDirectory(prefix="dupfilter-corpus-") as folder:
        corpus = read_corpus(shared_corpus.unpack(Path(folder), args.corpus))
    reports = [evaluate(corpus, originals=args.originals, seed=args.seed,
                        unrelated=args.unrelated, replies=args.replies,
                        per_kind=args.per_kind, threshold=args.threshold,
                        sweep=sweep, kinds=args.kinds.split(",") if args.kinds else None,
                        worst=args.worst, overrides=args.set, busy=mode == "busy")
               for mode in (("empty", "busy") if args.mode == "both" else (args.mode,))]
    if args.json_out:
        args.json_out.write_text(as_json(*reports) + "\n", encoding="utf-8")
    if args.json:
        print(as_json(*reports))
    else:
        print("\n\n".join(f"## {report.mode} store\n\n" + render(report, not args.brief)
                           for report in reports))
        if len(reports) == 2:
            print("\n" + "\n".join(side_by_side(*reports)))
    return 0 if not any(report.targets_met() for report in reports) else 1


def side_by_side(empty: Report, busy: Report) -> list[str]:
    """Recall per kind and the false-positive rates, the two stores next to each other."""
    lines = ["| kind | empty store | busy store |", "| --- | ---: | ---: |"]
    busy_rows = {row.kind: row for row in busy.rows}
    for row in empty.rows:
        other = busy_rows.get(row.kind)
        lines.append(f"| {row.kind} | {row.rate:.1%} | "
                     f"{'-' if other is None else f'{other.rate:.1%}'} |")
    lines.append(f"| **all variants** | {empty.recall:.1%} | {busy.recall:.1%} |")
    for name in ("unrelated", "unrelated_content", "replies"):
        lines.append(f"| {name} (false positives) | {getattr(empty, name).rate:.1%} | "
                     f"{getattr(busy, name).rate:.1%} |")
    lines.append(f"| targets | {'met' if not empty.targets_met() else 'MISSED'} | "
                 f"{'met' if not busy.targets_met() else 'MISSED'} |")
    return lines


if __name__ == "__main__":
    sys.exit(main())
