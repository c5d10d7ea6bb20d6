"""The issue's quality targets on a small, fast version of ``bench/quality.py``.

150 originals from the shared SpamAssassin corpus are stored; one variant of every kind is
made of each (resent, list footer, re-wrapped, QP, base64, HTML, CRLF, edited words, inline
forward, truncated, changed signature) and must be called duplicate or near-duplicate (≥ 93%
per kind, ≥ 98% overall); of 300 unrelated corpus messages at most 0.2% (none), and of 150
replies quoting a whole original none, may be.  The corpus must be present: CI has ``shared/``
beside the checkout, and a missing corpus is a failure, never a skip.  Everything runs twice:
in a fresh store and in a busy host's store.
"""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support import bench

ORIGINALS, UNRELATED, SEED = 150, 300, 1


def _load_quality() -> ModuleType:
    return bench.load("quality")


@pytest.fixture(scope="module")
def quality() -> ModuleType:
    return _load_quality()


@pytest.fixture(scope="module", params=["empty", "busy"])
def report(quality: ModuleType, corpus_dir: Path, request: pytest.FixtureRequest) -> Any:
    """The evaluation with the originals in a fresh store, and in a busy host's store
    (bench/busy_store.py, built from the other half of the corpus): the targets hold in
    both."""
    return quality.evaluate(quality.read_corpus(corpus_dir), originals=ORIGINALS, seed=SEED,
                            unrelated=UNRELATED, busy=request.param == "busy")


def _explain(quality: ModuleType, report: Any, kind: str | None = None) -> str:
    text = quality.render(report, verbose=False)
    misses = getattr(report, "misses", {}).get(kind, []) if kind else []
    if misses:
        text += f"\n\nworst misses of {kind}:\n" + "\n".join(f"  {m}" for m in misses)
    return text


def test_every_kind_is_made(report: Any) -> None:
    rows = {row.kind: row for row in report.rows}
    missing = [kind for kind in _load_quality().variants.KINDS
               if rows.get(kind) is None or rows[kind].count < ORIGINALS * 0.9]
    assert not missing, f"too few variants made for {missing}"


@pytest.mark.parametrize("kind", list(_load_quality().variants.KINDS))
def test_recall_per_kind(quality: ModuleType, report: Any, kind: str) -> None:
    row = next(r for r in report.rows if r.kind == kind)
    if row.rate < quality.TARGET_PER_KIND:
        pytest.fail(f"{kind}: {row.called}/{row.count} = {row.rate:.1%} called duplicate or "
                    f"near-duplicate, target {quality.TARGET_PER_KIND:.0%}\n\n"
                    + _explain(quality, report, kind), pytrace=False)


def test_overall_recall(quality: ModuleType, report: Any) -> None:
    if report.recall < quality.TARGET_OVERALL:
        pytest.fail(f"overall recall {report.recall:.2%}, target "
                    f"{quality.TARGET_OVERALL:.0%}\n\n" + _explain(quality, report),
                    pytrace=False)


@pytest.mark.parametrize(("what", "kind", "wanted", "target"), [
    ("unrelated messages", "unrelated", UNRELATED, "TARGET_UNRELATED"),
    ("quoted replies", "quoted_reply", ORIGINALS, "TARGET_REPLIES"),
])
def test_unrelated_messages_and_quoted_replies_are_unique(
        quality: ModuleType, report: Any, what: str, kind: str, wanted: int,
        target: str) -> None:
    row = report.unrelated if kind == "unrelated" else report.replies
    found = report.false_positives.get(kind, [])
    limit = getattr(quality, target)
    assert row.count >= wanted * 0.9, f"only {row.count} {what}"
    if row.rate > limit:
        pytest.fail(f"{row.called}/{row.count} = {row.rate:.2%} {what} called duplicate or "
                    f"near-duplicate, target ≤ {limit:.1%}:\n"
                    + "\n".join(f"  {f}" for f in found), pytrace=False)
