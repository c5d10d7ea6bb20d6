"""dupfilter under real procmail, and many deliveries into one store at once."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from helpers import make_message, paragraph_text
from support.cli import DUPFILTER, DUPFILTER_DB, installed

PROCMAIL = shutil.which("procmail")


@pytest.fixture(autouse=True)
def _tools() -> None:
    assert PROCMAIL, "procmail is not installed (.ci/run installs it)"
    assert installed(), "dupfilter is not installed (pip install -e .)"


def rcfile(tmp_path: Path, recipe: str) -> Path:
    mail = tmp_path / "mail"
    mail.mkdir(exist_ok=True)
    path = tmp_path / "procmailrc"
    path.write_text(
        f"SHELL=/bin/sh\nPATH={Path(DUPFILTER).parent}:/usr/bin:/bin\n"
        f"MAILDIR={mail}\nDEFAULT=$MAILDIR/inbox/\nLOGFILE={tmp_path}/procmail.log\n"
        f"STORE={tmp_path}/store\n" + recipe)
    return path


TAG_RECIPE = """
:0 fw
| dupfilter --db $STORE --tag
:0 e
{ EXITCODE=75 HOST }
:0
* ^X-Dupfilter: (near-)?duplicate
duplicates/
:0
inbox/
"""

CHECK_RECIPE = """
:0 HB
* ? dupfilter --db $STORE --check
duplicates/
:0
inbox/
"""


def deliver(rc: Path, raw: bytes) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([PROCMAIL, "-m", str(rc)], input=raw, capture_output=True,
                          timeout=60)


def folder(tmp_path: Path, name: str) -> list[bytes]:
    new = tmp_path / "mail" / name / "new"
    return [p.read_bytes() for p in sorted(new.iterdir())] if new.exists() else []


def test_tag_recipe_files_duplicates_apart(tmp_path: Path) -> None:
    rc = rcfile(tmp_path, TAG_RECIPE)
    text = paragraph_text(1, count=200)
    for index, body in enumerate([text, text, text + "\nP.S. one more line here.\n",
                                  paragraph_text(2, count=200)]):
        result = deliver(rc, make_message(body, message_id=f"<p{index}@example.org>"))
        assert result.returncode == 0, (result.stderr, (tmp_path / "procmail.log").read_text())
    inbox, duplicates = folder(tmp_path, "inbox"), folder(tmp_path, "duplicates")
    assert len(inbox) == 2 and len(duplicates) == 2
    assert all(m.startswith(b"X-Dupfilter: unique") for m in inbox)
    assert duplicates[0].startswith(b"X-Dupfilter: duplicate;") or \
        duplicates[1].startswith(b"X-Dupfilter: duplicate;")
    assert any(m.startswith(b"X-Dupfilter: near-duplicate;") for m in duplicates)


def test_filter_failure_still_delivers_untouched(tmp_path: Path) -> None:
    rc = rcfile(tmp_path, TAG_RECIPE)
    (tmp_path / "store").write_text("not a store")     # the store cannot be opened
    raw = make_message(paragraph_text(3))
    assert deliver(rc, raw).returncode == 0
    inbox = folder(tmp_path, "inbox")
    assert len(inbox) == 1
    assert inbox[0].rstrip(b"\n").endswith(raw.split(b"\n\n", 1)[1].rstrip(b"\n"))
    assert b"X-Dupfilter" not in inbox[0]
    assert "passed through unchecked" in (tmp_path / "procmail.log").read_text()


def test_filter_failure_does_not_let_a_forged_header_file_the_message_away(
        tmp_path: Path) -> None:
    """The store cannot be opened: a sender's own "X-Dupfilter: duplicate" must not send
    the message to duplicates/ (the pass-through removes it)."""
    rc = rcfile(tmp_path, TAG_RECIPE)
    (tmp_path / "store").write_text("not a store")
    raw = make_message(paragraph_text(7), headers={"X-Dupfilter": "duplicate; score=1.00"})
    assert deliver(rc, raw).returncode == 0
    assert folder(tmp_path, "duplicates") == []
    [delivered] = folder(tmp_path, "inbox")
    assert b"X-Dupfilter" not in delivered
    assert "passed through unchecked" in (tmp_path / "procmail.log").read_text()


def test_check_recipe_with_hb_flags(tmp_path: Path) -> None:
    rc = rcfile(tmp_path, CHECK_RECIPE)
    raw = make_message(paragraph_text(4, count=200))
    deliver(rc, raw)
    deliver(rc, make_message(paragraph_text(4, count=200), message_id="<other@example.org>"))
    assert len(folder(tmp_path, "inbox")) == 1
    duplicates = folder(tmp_path, "duplicates")
    assert len(duplicates) == 1 and b"X-Dupfilter" not in duplicates[0]


def test_check_recipe_without_body_flag_sees_only_the_header(tmp_path: Path) -> None:
    """Why the docs insist on HB: a plain `* ?` condition gets the header only."""
    rc = rcfile(tmp_path, CHECK_RECIPE.replace(":0 HB", ":0"))
    deliver(rc, make_message(paragraph_text(5, count=200), message_id="<a@example.org>"))
    deliver(rc, make_message(paragraph_text(6, count=200), message_id="<b@example.org>"))
    # Both bodies differ, but with headers only the two look like empty-bodied mail:
    # neither is called a duplicate (empty bodies never match), both go to the inbox.
    assert len(folder(tmp_path, "inbox")) == 2


def test_concurrent_deliveries_record_each_message_once(tmp_path: Path) -> None:
    store = tmp_path / "store"
    distinct = 12
    copies = 4
    messages = [make_message(paragraph_text(seed, count=150), message_id=f"<c{seed}.{copy}@x>")
                for seed in range(distinct) for copy in range(copies)]
    random.Random(7).shuffle(messages)

    def one(raw: bytes) -> tuple[int, bytes, bytes]:
        result = subprocess.run([DUPFILTER, "--db", str(store), "--tag"], input=raw,
                                capture_output=True, timeout=120)
        return result.returncode, result.stdout, result.stderr

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(one, messages))
    assert all(code == 0 and not err for code, _, err in results), \
        [err for _, _, err in results if err][:3]
    verdicts = [out.split(b"\n", 1)[0].split(b";")[0] for _, out, _ in results]
    assert verdicts.count(b"X-Dupfilter: unique") == distinct
    assert verdicts.count(b"X-Dupfilter: duplicate") == distinct * (copies - 1)
    stats = json.loads(subprocess.run([DUPFILTER_DB, "--db", str(store), "stats", "--json"],
                                      capture_output=True).stdout)
    assert stats["records"] == distinct
    verify = subprocess.run([DUPFILTER_DB, "--db", str(store), "verify"], capture_output=True)
    assert verify.returncode == 0, verify.stdout
