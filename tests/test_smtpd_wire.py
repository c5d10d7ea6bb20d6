"""What dupfilter-smtpd sends the next hop: the invariants of tests/fuzz/fuzz_smtpd_wire.py.

The harness's ``check`` over its hand-made edge cases and the fuzz seeds (fast and
deterministic), proof that it fails when the wire format breaks, and a short fuzz run.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from mailfilter.smtpd import wire

sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers import run_fuzzer  # noqa: E402

FUZZ = Path(__file__).resolve().parent / "fuzz"


def _harness():
    spec = importlib.util.spec_from_file_location("fuzz_smtpd_wire",
                                                  FUZZ / "fuzz_smtpd_wire.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


harness = _harness()


@pytest.mark.parametrize("raw", harness.EDGE_CASES, ids=repr)
def test_edge_cases_keep_the_wire_invariants(raw: bytes) -> None:
    harness.check(raw)


def test_seed_messages_keep_the_wire_invariants() -> None:
    seeds = sorted((FUZZ / "seeds").iterdir())
    assert seeds
    for path in seeds:
        raw = path.read_bytes()
        harness.check(raw)
        harness.check(raw.replace(b"\n", b"\r\n"))


def _no_stuffing(message: bytes) -> bytes:
    return message + b".\r\n"


def _first_dot_only(message: bytes) -> bytes:
    return (b"." + message if message.startswith(b".") else message) + b".\r\n"


def _crlf_keeps_bare_lf(data: bytes) -> bytes:
    return data if not data or data.endswith(b"\n") else data + b"\r\n"


def _crlf_no_final_line_end(data: bytes) -> bytes:
    return wire.BARE_LF.sub(b"\r\n", data)


def _crlf_drops_lone_cr(data: bytes) -> bytes:
    return wire.BARE_LF.sub(b"\r\n", data.replace(b"\r\n", b"\n").replace(b"\r", b"")) \
        .rstrip(b"\r\n") + b"\r\n"


@pytest.mark.parametrize(("name", "broken"), [
    ("dot_stuff", _no_stuffing),
    ("dot_stuff", _first_dot_only),
    ("to_crlf", _crlf_keeps_bare_lf),
    ("to_crlf", _crlf_no_final_line_end),
    ("to_crlf", _crlf_drops_lone_cr),
])
def test_the_check_fails_on_a_broken_wire_format(
        monkeypatch: pytest.MonkeyPatch, name: str, broken: Callable[[bytes], bytes]) -> None:
    """The invariants can fail: each broken ``to_crlf``/``dot_stuff`` breaks one edge case."""
    monkeypatch.setattr(wire, name, broken)
    failed = 0
    for raw in harness.EDGE_CASES:
        try:
            harness.check(raw)
        except AssertionError:
            failed += 1
    assert failed, f"a broken {name} went unnoticed"


def test_wire_fuzzer_finds_nothing(tmp_path: Path) -> None:
    """libFuzzer-guided (atheris) run over the wire path: 5,000 inputs from the edge cases."""
    corpus = tmp_path / "corpus"
    shutil.copytree(FUZZ / "seeds", corpus)
    for number, raw in enumerate(harness.EDGE_CASES):
        (corpus / f"edge-{number}").write_bytes(raw)
    run_fuzzer(FUZZ / "fuzz_smtpd_wire.py", corpus, 5000, tmp_path)
