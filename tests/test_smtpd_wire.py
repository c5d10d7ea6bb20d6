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
from hypothesis import given, settings
from hypothesis import strategies as st

from mailfilter.smtpd import protocol, wire

sys.path.insert(0, str(Path(__file__).resolve().parent))
from helpers import peak_allocated, run_fuzzer  # noqa: E402

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


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=40).map(lambda data: data.translate(bytes.maketrans(
    bytes(range(256)), b"\r\n.a" * 64))), st.integers(1, 9))
def test_stuffed_dots_come_off_a_round_at_a_time_as_in_one_pass(data: bytes,
                                                                  round_bytes: int) -> None:
    """The dots a client added (RFC 5321, 4.5.2) come off 64 KiB at a time, each round's
    search seeing the bytes before and after it: the same bytes as one pass over all."""
    one_pass = protocol._STUFFED_DOT.sub(b"", data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(protocol, "_ROUND", round_bytes)
        assert protocol._without_stuffed_dots(data) == one_pass


@pytest.mark.parametrize(("name", "rewrite", "data"), [
    ("bare LFs to CRLF", wire.to_crlf, b"\n" * (1 << 20)),
    ("dot lines stuffed", wire.dot_stuff, b".\r\n" * ((1 << 20) // 3)),
    ("stuffed dots taken off", protocol._without_stuffed_dots, b"..\r\n" * (1 << 18)),
    ("stuffed dots after bare LFs", protocol._without_stuffed_dots, b"\n.." * ((1 << 20) // 3)),
], ids=["bare LFs", "dot lines", "stuffed dots", "stuffed dots after bare LFs"])
def test_rewriting_a_mib_of_short_lines_allocates_about_the_message(
        name: str, rewrite: Callable[[bytes], bytes], data: bytes) -> None:
    """A substitution over the whole message kept an object for each of a million lines
    (300–360 MB for 4 MiB, in the daemon that serves every session); now the peak of
    Python's allocations for 1 MiB stays under five times the message."""
    rewritten, peak = peak_allocated(lambda: rewrite(data))
    assert rewritten and peak < 5 * len(data), (name, peak)
