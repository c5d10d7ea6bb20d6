"""The pipe filter's cold start: what ``dupfilter --tag`` builds at every process start.

procmail starts ``dupfilter`` once per message, so whatever its imports build is paid per
message (docs/performance.md, "Cold start").  A dataclass compiles its generated methods
with ``exec`` in every process (0.4–0.85 ms a class); the records on this path are
``mailfilter.values`` classes instead.  The settings sections (config.py) stay dataclasses:
validation and ``dupfilter-db config`` read their fields and types.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from mailfilter.values import replace

REPO = Path(__file__).resolve().parents[1]

# Runs one ``dupfilter --tag`` in this interpreter, with dataclasses' class builder
# wrapped, and prints every dataclass made (module.qualname), one a line, on stderr.
_COUNT_DATACLASSES = """
import dataclasses, sys
made = []
build = dataclasses._process_class
def counted(cls, *args, **kwargs):
    made.append(cls.__module__ + "." + cls.__qualname__)
    return build(cls, *args, **kwargs)
dataclasses._process_class = counted
from mailfilter.cli import pipe
try:
    status = pipe.main(["--tag", "--db", sys.argv[1]])
except SystemExit as done:
    status = done.code
print("\\n".join(["status %s" % status, *made]), file=sys.stderr)
"""


def test_dupfilter_tag_builds_no_dataclass_outside_the_settings(tmp_path: Path) -> None:
    """``dupfilter --tag`` makes no dataclass but config.py's settings sections.  Before,
    it made 20 more (store, detector, rules, decision, engine, policy, headers), about
    8 ms of CPU at each start: 2.7× ``python -I -c pass`` where 2.5× is the budget."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("DUPFILTER_CONFIG", None)
    done = subprocess.run([sys.executable, "-c", _COUNT_DATACLASSES, str(tmp_path / "db")],
                          input=b"From: a@example.org\nSubject: hello\n\nhello world\n",
                          capture_output=True, env=env, cwd=tmp_path, timeout=120)
    lines = done.stderr.decode().splitlines()
    assert lines and lines[0] == "status 0", done.stderr.decode()
    assert b"X-Dupfilter:" in done.stdout       # the message was checked and tagged
    made = lines[1:]
    assert made, "config.py's sections are dataclasses: the wrapper saw none at all"
    assert [name for name in made if not name.startswith("mailfilter.config.")] == []


def test_mutable_records_keep_dataclass_behaviour() -> None:
    """A Found's lists and dicts are its own (a shared default would carry one check's ids
    into the next); Record compares by fields, cannot be hashed, and is changed in place
    or copied by ``replace`` as before; a pair rule's Pair compares by identity."""
    from mailfilter.store import Found, Record

    first, second = Found(), Found()
    first.by_digest.append(1)
    first.records[1] = None   # type: ignore[assignment]
    assert second.by_digest == [] and second.records == {}
    record = Record(bytes(36), 0, 0, (1, 2), 2, 2, bytes(16), None, None)
    copy = replace(record, doc_id=7)
    assert copy != record and replace(copy, doc_id=0) == record
    copy.doc_id = 0
    assert copy == record and record.seen == 1
    with pytest.raises(TypeError):
        hash(record)
    with pytest.raises(TypeError, match="no field"):
        replace(record, doc=1)
    assert pickle.loads(pickle.dumps(record)) == record


def test_immutable_records_pickle_and_stay_generic() -> None:
    """What a worker process sends back (an Analysis) pickles whole; a Verdict cannot be
    changed; ``Decision[P]`` is still generic."""
    from mailfilter.config import FingerprintSettings
    from mailfilter.detector import Verdict
    from mailfilter.engine import Analysis, Decision, Keep, analyse
    from mailfilter.names import Kind

    analysis = analyse(b"From: a@example.org\nSubject: x\n\nhello there, world\n",
                       FingerprintSettings())
    assert isinstance(analysis, Analysis)
    assert pickle.loads(pickle.dumps(analysis)) == analysis
    verdict = Verdict(Kind.UNIQUE, analysis.fingerprint, analysis.message_id)
    with pytest.raises(AttributeError):
        verdict.score = 1.0     # type: ignore[misc]
    assert replace(verdict, score=0.5).score == 0.5 and verdict.score is None
    decision = Decision[Keep](verdict, Keep(True), None)
    assert decision == Decision(verdict, Keep(True), None)
    assert repr(Keep(True)) == "Keep(record=True)"
