"""`dupfilter` and `dupfilter-db` processes sharing a Redis: two configurations seeing each
other's mail, and Redis killed mid-stream (mail passes through, checking resumes)."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from helpers import make_message, paragraph_text
from support.cli import DUPFILTER_DB, installed, run
from support.cli import tag as tag_with

if TYPE_CHECKING:
    from redis_servers import RedisServer

pytest_plugins = ("redis_servers",)



@pytest.fixture(autouse=True)
def _installed() -> None:
    assert installed(), "install the project first: pip install -e ."


def header_of(output: bytes) -> str | None:
    head = output.split(b"\n\n", 1)[0].decode()
    found = [line for line in head.splitlines() if line.lower().startswith("x-dupfilter:")]
    assert len(found) <= 1
    return found[0].split(":", 1)[1].strip() if found else None


def write_config(path: Path, detector: str) -> Path:
    """A config with its own [detector] settings and the default [fingerprint]."""
    path.write_text("[fingerprint]\nngram = 5\nsketch_size = 64\n\n[detector]\n" + detector)
    return path


@pytest.fixture
def configs(tmp_path: Path) -> tuple[Path, Path]:
    strict = write_config(tmp_path / "strict.toml",
                          "resemblance_threshold = 0.8\nmin_words = 20\nposting_cap = 16\n")
    loose = write_config(tmp_path / "loose.toml",
                         "resemblance_threshold = 0.4\nscope = \"global\"\n")
    return strict, loose


def tag(url: str, config: Path, raw: bytes, *extra: str) -> subprocess.CompletedProcess[bytes]:
    return tag_with(url, raw, "--config", str(config), *extra)


def test_two_configurations_see_each_others_messages(redis_url: str,
                                                     configs: tuple[Path, Path]) -> None:
    strict, loose = configs
    texts = [paragraph_text(600 + i, count=200) for i in range(8)]

    # Both processes at once, each on its own half of the messages.
    def deliver(index: int) -> str | None:
        config = strict if index % 2 else loose
        raw = make_message(texts[index], message_id=f"<orig{index}@example.org>")
        done = tag(redis_url, config, raw, "--recipient", "postmaster@example.org")
        assert done.returncode == 0 and b"passed through" not in done.stderr, done.stderr
        return header_of(done.stdout)

    with ThreadPoolExecutor(max_workers=4) as pool:
        assert list(pool.map(deliver, range(8))) == ["unique"] * 8

    # Each configuration now sees the other's messages: copies are duplicates, edits near.
    for index in range(8):
        config = loose if index % 2 else strict
        copy = make_message(texts[index], message_id=f"<copy{index}@example.org>")
        verdict = header_of(tag(redis_url, config, copy, "--recipient",
                                "postmaster@example.org").stdout)
        assert verdict.startswith("duplicate; score=1.00; reason=digest; "
                                  f"match=<orig{index}@example.org>; seen=2"), verdict
        words = texts[index].split(" ")
        words[30] = "rewritten"
        edited = make_message(" ".join(words), message_id=f"<edit{index}@example.org>")
        verdict = header_of(tag(redis_url, config, edited, "--recipient",
                                "postmaster@example.org").stdout)
        assert verdict.startswith("near-duplicate; score="), verdict
    stats = json.loads(run(DUPFILTER_DB, "--db", redis_url, "stats", "--json").stdout)
    assert stats["backend"] == "redis" and stats["records"] == 16


def test_other_fingerprint_parameters_are_refused_and_mail_passes(
        redis_url: str, tmp_path: Path, configs: tuple[Path, Path]) -> None:
    strict, _ = configs
    raw = make_message(paragraph_text(700), message_id="<p@x>")
    assert header_of(tag(redis_url, strict, raw).stdout) == "unique"
    other = tmp_path / "other.toml"
    other.write_text("[fingerprint]\nngram = 4\n")
    done = tag(redis_url, other, raw)
    assert done.returncode == 0 and done.stdout == raw
    assert b"ngram=5 (configured 4)" in done.stderr and b"passed through unchecked" \
        in done.stderr


def test_redis_killed_mid_stream(spare_redis: RedisServer, configs: tuple[Path, Path]) -> None:
    """No mail is lost while Redis is down, and checking resumes once it is back."""
    strict, _ = configs
    url = spare_redis.url
    stream = [make_message(paragraph_text(800 + i), message_id=f"<s{i}@example.org>")
              for i in range(9)]
    outputs = []
    for index, raw in enumerate(stream):
        if index == 3:
            spare_redis.kill()
        if index == 6:
            spare_redis.start()  # same port, empty (no persistence)
        done = tag(url, strict, raw)
        assert done.returncode == 0, done.stderr
        outputs.append(done)
    for done in outputs[:3] + outputs[6:]:
        assert header_of(done.stdout) == "unique" and done.stderr == b""
    for raw, done in zip(stream[3:6], outputs[3:6], strict=True):
        assert done.stdout == raw  # byte for byte: passed through, no header
        line = done.stderr.decode().strip()
        assert line.startswith(f"dupfilter: cannot reach Redis at {url}")
        assert line.endswith("message passed through unchecked") and "\n" not in line
    again = tag(url, strict, make_message(paragraph_text(806), message_id="<again@x>"))
    assert header_of(again.stdout).startswith("duplicate; score=1.00; reason=digest; "
                                              "match=<s6@example.org>")


def test_admin_commands_on_redis(cluster_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "mail"
    folder.mkdir()
    for index in range(12):
        (folder / f"{index}.eml").write_bytes(make_message(
            paragraph_text(900 + index % 10), message_id=f"<i{index}@example.org>"))
    done = run(DUPFILTER_DB, "--db", cluster_url, "import", "--jobs", "1", str(folder))
    assert done.returncode == 0, done.stderr
    assert b"imported 12 messages (10 unique, 2 duplicate" in done.stdout
    assert b"store has 10 records" in done.stdout
    verify = run(DUPFILTER_DB, "--db", cluster_url, "verify")
    assert verify.returncode == 0 and b"10 records checked: 0 problems" in verify.stdout
    pruned = run(DUPFILTER_DB, "--db", cluster_url, "prune")
    assert pruned.returncode == 0 and b"expire by Redis TTL" in pruned.stdout
    for args in (["--dry-run"], ["--older-than", "1s"], ["--older-than", "1s", "--dry-run"]):
        pruned = run(DUPFILTER_DB, "--db", cluster_url, "prune", *args)
        assert pruned.returncode == 0 and b"expire by Redis TTL" in pruned.stdout, args
    forgot = run(DUPFILTER_DB, "--db", cluster_url, "forget", "--message-id", "<i3@example.org>")
    assert forgot.returncode == 0 and forgot.stdout.startswith(b"forgot 1 record:\n  #")
    assert b" <i3@example.org>  first seen " in forgot.stdout
    stats = run(DUPFILTER_DB, "--db", cluster_url, "stats")
    assert b"records    9" in stats.stdout and b"(redis)" in stats.stdout
