"""``dupfilter-db dedupe`` on real Maildir folders and mbox files filled from the corpus plus
crafted copies: what it finds, which copy it keeps, what each action leaves on disk, that
--dry-run changes nothing, that --undo puts back the exact files, and that a run killed
half-way loses nothing."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import mailboxes as mb
from support.cli import DUPFILTER_DB

from mailfilter.cli.admin import main


@pytest.fixture(scope="module")
def filled(corpus_messages: list[Path]) -> mb.Filled:
    return mb.crafted_mailbox(corpus_messages, 60)


@pytest.fixture
def maildir(tmp_path: Path, filled: mb.Filled) -> Path:
    folder = tmp_path / "Maildir"
    mb.fill_maildir(folder, filled.messages)
    return folder


@pytest.fixture
def mbox(tmp_path: Path, filled: mb.Filled) -> Path:
    path = tmp_path / "mail" / "inbox"
    path.parent.mkdir()
    path.write_bytes(mb.mbox_bytes(filled.messages))
    return path


def dedupe(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["dedupe", *args])
    out, err = capsys.readouterr()
    return code, out, err


def groups(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if '"keep"' in line]


def name_of(row: dict) -> str:
    """The test's name of a message from its report row (Maildir file or mbox From line)."""
    return row["key"].split("/")[-1].split(".")[0]


def copies_found(out: str) -> dict[str, str]:
    return {name_of(copy): name_of(group["keep"]) for group in groups(out)
            for copy in group["copies"]}


def mbox_names(path: Path) -> list[str]:
    return [line.split()[1].split("@")[0] for line in path.read_text(errors="replace")
            .splitlines() if line.startswith("From ") and "@test  " in line]


def test_exact_report_finds_every_copy_keeps_each_original_and_changes_nothing(
        capsys: pytest.CaptureFixture[str], maildir: Path, filled: mb.Filled) -> None:
    before = mb.tree(maildir)
    code, out, _ = dedupe(capsys, "--json", str(maildir))
    assert code == 0
    # Re-fetched and re-encoded (quoted-printable, base64) copies, each against its original.
    assert copies_found(out) == filled.copies
    assert mb.tree(maildir) == before
    summary = json.loads(out.splitlines()[-1])["summary"]
    assert summary == summary | {"messages": len(filled.messages), "copies": len(filled.copies),
                                 "changed": 0}


def test_exact_copies_need_the_message_id_and_the_text_not_the_bytes(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, filled: mb.Filled) -> None:
    """Under one Message-ID, a re-fetched copy (a Received line on top) and a base64 copy
    are the message; another text under that Message-ID is not, and its own re-fetched copy
    is its copy.  Catches grouping by Message-ID alone (an exact run reads and analyses only
    what its Message-IDs group) and by bytes alone (the base64 copy), and copies without a
    Message-ID grouped by bytes alone (one without: another Date is another message)."""
    original = filled.messages["notice1"]
    other = original.replace(b"Amount charged: 59.90", b"Amount charged: 99.90")
    no_id = original.replace(b"Message-ID: <order.4711-2026@shop.example>\n", b"")
    assert no_id != original
    root = tmp_path / "Maildir"
    mb.fill_maildir(root, {
        "a": original, "b": mb.refetched(original), "c": mb.reencoded(original, "base64"),
        "d": other, "e": mb.refetched(other),
        "f": no_id, "g": mb.refetched(no_id), "h": mb.reencoded(no_id, "base64"),
        "i": no_id.replace(b"08:01:00", b"08:02:00")})
    code, out, _ = dedupe(capsys, "--json", str(root))
    assert code == 0
    assert copies_found(out) == {"b": "a", "c": "a", "e": "d", "g": "f", "h": "f"}
    summary = json.loads(out.splitlines()[-1])["summary"]
    assert summary["read_whole"] == 9


def test_near_also_finds_forwards_and_never_a_templated_notice(
        capsys: pytest.CaptureFixture[str], maildir: Path, filled: mb.Filled) -> None:
    code, out, _ = dedupe(capsys, "--near", "--json", str(maildir))
    assert code == 0
    found = copies_found(out)
    kept = {name_of(group["keep"]) for group in groups(out)}
    assert set(filled.copies) | set(filled.near_copies) == set(found)
    assert not filled.must_stay & set(found)
    # Every group keeps a corpus original, never a forward or a re-fetched copy.
    assert all(name.startswith("m") for name in kept)


def test_dry_run_prints_each_move_and_changes_nothing(
        capsys: pytest.CaptureFixture[str], maildir: Path, filled: mb.Filled,
        tmp_path: Path) -> None:
    before = mb.tree(maildir)
    log = tmp_path / "undo.jsonl"
    code, out, _ = dedupe(capsys, "--action", "move", "--dry-run", "--undo-log", str(log),
                          str(maildir))
    assert code == 0
    moves = [line for line in out.splitlines() if line.strip().startswith("would move")]
    assert len(moves) == len(filled.copies)
    assert all(f"-> {maildir}/.Duplicates" in line for line in moves)
    assert "--dry-run: nothing moved" in out
    assert mb.tree(maildir) == before
    assert not log.exists()


def test_maildir_move_then_undo_restores_the_exact_files(
        capsys: pytest.CaptureFixture[str], maildir: Path, filled: mb.Filled,
        tmp_path: Path) -> None:
    before = mb.tree(maildir)
    log = tmp_path / "undo.jsonl"
    code, out, _ = dedupe(capsys, "--action", "move", "--undo-log", str(log), str(maildir))
    assert code == 0, out
    left = {path.name.split(".")[0] for path in (maildir / "cur").iterdir()}
    moved = {path.name.split(".")[0] for path in (maildir / ".Duplicates" / "cur").iterdir()}
    assert moved == set(filled.copies)
    assert left == set(filled.messages) - set(filled.copies)
    # The copies arrived byte for byte.
    for name in moved:
        (path,) = (maildir / ".Duplicates" / "cur").glob(f"{name}.*")
        assert path.read_bytes() == filled.messages[name]
    code, out, _ = dedupe(capsys, "--undo", str(log))
    assert code == 0, out
    after = mb.tree(maildir)
    assert {k: v for k, v in after.items() if not k.startswith(".Duplicates")} == before
    assert not list((maildir / ".Duplicates" / "cur").iterdir())


def test_maildir_flag_marks_only_the_copies_and_undo_unmarks_them(
        capsys: pytest.CaptureFixture[str], maildir: Path, filled: mb.Filled,
        tmp_path: Path) -> None:
    before = mb.tree(maildir)
    log = tmp_path / "undo.jsonl"
    assert dedupe(capsys, "--action", "flag", "--undo-log", str(log), str(maildir))[0] == 0
    flagged = {p.name.split(".")[0] for p in (maildir / "cur").iterdir()
               if p.name.endswith(":2,FS")}
    assert flagged == set(filled.copies)
    assert dedupe(capsys, "--undo", str(log))[0] == 0
    assert mb.tree(maildir) == before


def test_maildir_delete_needs_yes_and_then_removes_only_the_copies(
        capsys: pytest.CaptureFixture[str], maildir: Path, filled: mb.Filled,
        tmp_path: Path) -> None:
    before = mb.tree(maildir)
    code, _, err = dedupe(capsys, "--action", "delete", str(maildir))
    assert code == 2 and "--yes" in err
    assert mb.tree(maildir) == before
    log = tmp_path / "undo.jsonl"
    assert dedupe(capsys, "--action", "delete", "--yes", "--undo-log", str(log),
                  str(maildir))[0] == 0
    left = {path.name.split(".")[0] for path in (maildir / "cur").iterdir()}
    assert left == set(filled.messages) - set(filled.copies)
    code, out, _ = dedupe(capsys, "--undo", str(log))
    assert out.count("CANNOT undo") == len(filled.copies)


def test_mbox_move_flag_and_undo_restore_the_exact_file(
        capsys: pytest.CaptureFixture[str], mbox: Path, filled: mb.Filled,
        tmp_path: Path) -> None:
    original = mbox.read_bytes()
    log = tmp_path / "move.jsonl"
    assert dedupe(capsys, "--action", "move", "--undo-log", str(log), str(mbox))[0] == 0
    target = mbox.with_name("Duplicates")
    assert sorted(mbox_names(target)) == sorted(filled.copies)
    assert set(mbox_names(mbox)) == set(filled.messages) - set(filled.copies)
    assert not mbox.with_name("inbox.lock").exists()
    assert dedupe(capsys, "--undo", str(log))[0] == 0
    assert mbox.read_bytes() == original
    assert mbox_names(target) == []

    log = tmp_path / "flag.jsonl"
    assert dedupe(capsys, "--action", "flag", "--undo-log", str(log), str(mbox))[0] == 0
    flagged = [chunk.split(b"@", 1)[0].decode() for chunk in mbox.read_bytes()
               .split(b"\nFrom ") if b"X-Status: F" in chunk.split(b"\n\n", 1)[0].split(b"\n")]
    assert sorted(flagged) == sorted(filled.copies)
    assert dedupe(capsys, "--undo", str(log))[0] == 0
    assert mbox.read_bytes() == original


def test_mbox_delete_with_yes_keeps_every_other_message_byte_for_byte(
        capsys: pytest.CaptureFixture[str], mbox: Path, filled: mb.Filled) -> None:
    assert dedupe(capsys, "--action", "delete", "--yes", "--undo-log",
                  str(mbox.parent / "undo.jsonl"), str(mbox))[0] == 0
    kept = {name: raw for name, raw in filled.messages.items() if name not in filled.copies}
    assert mbox.read_bytes() == mb.mbox_bytes(kept)


def test_keep_strategies_choose_the_copy_a_user_asked_for(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, filled: mb.Filled) -> None:
    original = filled.messages["notice1"]
    later = original.replace(b"Date: Fri, 04 Dec 2026 08:01:00", b"Date: Sat, 05 Dec 2026 08:01:00")
    reencoded = mb.reencoded(original, "base64")
    root = tmp_path / "Maildir"
    mb.fill_maildir(root, {"a-original": original, "b-later": later})
    mb.fill_maildir(root / ".Archive", {"c-archived": reencoded})

    def kept(*args: str) -> set[str]:
        code, out, _ = dedupe(capsys, "--json", *args, str(root))
        assert code == 0
        return {name_of(group["keep"]) for group in groups(out)}

    assert kept() == {"a-original"}
    assert kept("--keep", "newest") == {"b-later"}
    assert kept("--across-folders") == {"a-original"}
    assert kept("--across-folders", "--keep", "largest") == {"c-archived"}
    assert kept("--across-folders", "--keep", "folder:Archive") == {"c-archived"}
    # Within folders (the default) the archived copy has no twin in its folder.
    code, out, _ = dedupe(capsys, "--json", "--keep", "folder:Archive", str(root))
    assert [name_of(c) for g in groups(out) for c in g["copies"]] == ["b-later"]
    code, _, err = dedupe(capsys, "--keep", "biggest", str(root))
    assert code == 2 and "--keep biggest" in err


def test_a_move_killed_half_way_loses_nothing_and_a_second_run_finishes(
        tmp_path: Path, corpus_messages: list[Path]) -> None:
    mail = mb.corpus_mail(corpus_messages, 300, start=100)
    messages = {f"m{n:04d}": raw for n, raw in enumerate(mail)}
    messages |= {f"r{n:04d}": mb.refetched(raw) for n, raw in enumerate(mail)}
    root = tmp_path / "Maildir"
    mb.fill_maildir(root, messages)
    everything = sorted(hashlib.sha256(raw).hexdigest() for raw in messages.values())
    log = tmp_path / "undo.jsonl"
    run = subprocess.Popen([DUPFILTER_DB, "dedupe", "--action", "move", "--undo-log", str(log),
                            str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and run.poll() is None:
        if log.exists() and log.read_text().count("\n") > 70:   # a second batch logged
            os.kill(run.pid, signal.SIGKILL)
            break
        time.sleep(0.001)
    run.wait()
    assert run.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    # Every message is in INBOX or Duplicates (a file caught between link and unlink is in
    # both, never in neither).
    present = mb.contents(root)
    assert set(present) == set(everything)
    assert 64 <= len(list((root / ".Duplicates" / "cur").iterdir())) < 300
    finished = subprocess.run([DUPFILTER_DB, "dedupe", "--action", "move", "--undo-log",
                               str(tmp_path / "second.jsonl"), str(root)],
                              capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert sorted(p.name.split(".")[0] for p in (root / "cur").iterdir()) == \
        sorted(name for name in messages if name.startswith("m"))
    assert {p.name.split(".")[0] for p in (root / ".Duplicates" / "cur").iterdir()} == \
        {name for name in messages if name.startswith("r")}
    # The first, interrupted run's log still puts back what it moved.
    undone = subprocess.run([DUPFILTER_DB, "dedupe", "--undo", str(log)], capture_output=True,
                            text=True, timeout=300)
    assert undone.returncode == 0, undone.stdout[-2000:]
    assert set(mb.contents(root)) == set(everything)


def test_sources_that_are_not_mailboxes_are_refused_clearly(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = dedupe(capsys, str(tmp_path))
    assert code == 2 and "not a Maildir" in err
    code, _, err = dedupe(capsys, "imaps://alice:secret@example.org/INBOX")
    assert code == 2 and "no password in the URL" in err


def test_the_maildir_and_mbox_recipes_of_docs_cleanup_md_run_as_written(
        tmp_path: Path, filled: mb.Filled) -> None:
    from doc_blocks import blocks
    home = tmp_path / "home"
    mb.fill_maildir(home / "Maildir", filled.messages)
    mb.fill_maildir(home / "Maildir" / ".Archive",
                    {name: raw for name, raw in filled.messages.items() if name < "m0005"})
    (home / "mail").mkdir()
    (home / "mail" / "inbox").write_bytes(mb.mbox_bytes(filled.messages))
    before = mb.tree(home / "Maildir")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "DUPFILTER_"))}
    env |= {"HOME": str(home), "XDG_STATE_HOME": str(tmp_path / "state")}
    recipes = blocks("dedupe")
    assert len(recipes) == 3
    outputs = []
    for recipe in recipes:
        done = subprocess.run(["bash", "-e", "-c", recipe.text], capture_output=True,
                              text=True, env=env, timeout=300)
        assert done.returncode == 0, (recipe.where, done.stderr)
        outputs.append(done.stdout)
    # Look, dry run, move, undo: the Maildir as it was; then flagged; the mbox's copies aside.
    assert "--dry-run: nothing moved" in outputs[0] and "undid" in outputs[0]
    assert "flagged" in outputs[1]
    assert sorted(mbox_names(home / "mail" / "Duplicates")) == sorted(filled.copies)
    assert json.loads(outputs[2].splitlines()[-1])["summary"]["copies"] == 0
    flagged = {k for k in mb.tree(home / "Maildir") if k.endswith(":2,FS")}
    assert flagged and all(k.startswith(("cur/", ".Archive/cur/")) for k in flagged)
    assert len(mb.tree(home / "Maildir")) >= len(before)


def test_an_mbox_locked_by_procmails_lockfile_is_left_alone_until_released(
        mbox: Path, filled: mb.Filled, tmp_path: Path) -> None:
    original = mbox.read_bytes()
    lock = mbox.with_name("inbox.lock")
    subprocess.run(["lockfile", "-r0", str(lock)], check=True)
    run = subprocess.Popen([DUPFILTER_DB, "dedupe", "--action", "move", "--undo-log",
                            str(tmp_path / "undo.jsonl"), str(mbox)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(3)
    assert run.poll() is None, "dedupe did not wait for procmail's lock"
    assert mbox.read_bytes() == original
    lock.unlink()
    out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err
    assert sorted(mbox_names(mbox.with_name("Duplicates"))) == sorted(filled.copies)


def test_mbox_runs_killed_at_any_moment_lose_nothing(
        tmp_path: Path, corpus_messages: list[Path]) -> None:
    mail = mb.corpus_mail(corpus_messages, 200, start=400)
    messages = {f"m{n:04d}": raw for n, raw in enumerate(mail)}
    messages |= {f"r{n:04d}": mb.refetched(raw) for n, raw in enumerate(mail)}
    pristine = mb.mbox_bytes(messages)
    killed_mid_run = 0
    # Killed at each step a run goes through (a fixed delay is no use: a whole run takes a
    # fraction of a second): its undo log begun, the Duplicates mbox being appended to, the
    # inbox's temporary copy being written, and the moment the inbox was replaced.
    moments: dict[str, Callable[[Path], bool]] = {
        "log begun": lambda folder: (folder / "undo.jsonl").exists(),
        "appending": lambda folder: (folder / "Duplicates").exists(),
        "rewriting": lambda folder: any(folder.glob(".inbox.dedupe.*")),
        "replaced": lambda folder: (folder / "inbox").stat().st_size < len(pristine),
    }
    for moment, reached in moments.items():
        folder = tmp_path / moment.replace(" ", "-")
        folder.mkdir()
        inbox = folder / "inbox"
        inbox.write_bytes(pristine)
        run = subprocess.Popen([DUPFILTER_DB, "dedupe", "--action", "move", "--undo-log",
                                str(folder / "undo.jsonl"), str(inbox)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while run.poll() is None and time.monotonic() < deadline:
            if reached(folder):
                os.kill(run.pid, signal.SIGKILL)
                killed_mid_run += 1
                break
            time.sleep(0.0005)
        run.wait()
        delay = moment
        duplicates = folder / "Duplicates"
        held = mbox_names(inbox) + (mbox_names(duplicates) if duplicates.exists() else [])
        assert set(held) == set(messages), delay
        # The source is the old file or the new one, whole: never a mix.
        names = mbox_names(inbox)
        assert names == sorted(messages) or names == sorted(n for n in messages if n < "r")
        # The next run does not wait for the dotlock of the killed one, and finishes.
        again = subprocess.run([DUPFILTER_DB, "dedupe", "--action", "move", "--undo-log",
                                str(folder / "again.jsonl"), str(inbox)],
                               capture_output=True, text=True, timeout=60)
        assert again.returncode == 0, again.stderr
        assert mbox_names(inbox) == sorted(n for n in messages if n < "r")
        assert set(mbox_names(duplicates)) == {n for n in messages if n.startswith("r")}
    assert killed_mid_run >= 2


def test_many_contents_under_one_message_id_are_each_analysed_once(monkeypatch) -> None:
    """Each new content of a Message-ID settled every content the ID had shown (quadratic:
    16,000 copies, 4.2 s of bookkeeping); now each is analysed once, and the groups are
    the same as settling them all."""
    import types

    from mailfilter.config import Settings
    from mailfilter.dedupe import plan
    from mailfilter.dedupe.sources import StoredMessage

    folder = types.SimpleNamespace(name="INBOX", label="INBOX")
    grouper = plan.ExactGrouper(Settings(), across_folders=False)
    settled = []
    real = grouper._settle
    monkeypatch.setattr(grouper, "_settle", lambda variant: settled.append(variant.raw is not None)
                        or real(variant))
    count = 300
    for number in range(count):
        raw = (b"Message-ID: <same@example.org>\nSubject: s\n\nA different text, number %d.\n"
               % (number // 2))        # every content twice: 150 contents, 300 messages
        grouper.add(StoredMessage(folder, str(number), len(raw), None, raw))
    assert grouper.analysed == count // 2
    assert sum(settled) == count // 2 and len(settled) <= count     # no content again
    assert len(grouper.groups("oldest")) == count // 2


def test_trace_fields_are_read_in_memory_independent_of_their_lines() -> None:
    """The trace pattern kept a place to backtrack to for each continuation line of a
    Received: field (175 MB for 4 MiB); now possessive, it holds none."""
    from helpers import peak_allocated

    from mailfilter.dedupe.plan import below_trace

    raw = b"Received: from a\n" + b" by b\n" * 300_000 + b"Subject: s\n\nbody\n"
    rest, peak = peak_allocated(lambda: below_trace(raw))
    assert rest == b"Subject: s\n\nbody\n"
    assert peak < 2 * len(raw), peak


def test_taking_moved_messages_back_hashes_each_chunk_once(tmp_path: Path,
                                                           monkeypatch) -> None:
    """An interrupted move's undo takes the copies back out of the target: each chunk
    was hashed against every moved message (16,000 took 14 s); now once, and every copy
    (and nothing else) comes out."""
    from mailfilter.dedupe import sources

    chunks = [b"From a@example.org Mon Jan  1 00:00:00 2024\nSubject: %d\n\nbody %d\n\n"
              % (number, number) for number in range(1000)]
    target = tmp_path / "moved.mbox"
    kept = b"From k@example.org Mon Jan  1 00:00:00 2024\nSubject: kept\n\nstays\n\n"
    # (in the other order than the log's: each chunk was hashed against every entry
    # not yet found before its own)
    target.write_bytes(b"".join(chunks[:499:-1]) + kept + b"".join(chunks[499::-1]))
    moved = [{"sha256": sources.sha256(chunk), "length": len(chunk), "padding": ""}
             for chunk in chunks]
    hashed = []
    real = sources.sha256
    monkeypatch.setattr(sources, "sha256", lambda data: hashed.append(1) or real(data))
    found = sources._take_back(target, moved)
    assert sorted(found.values()) == sorted(chunks)
    assert target.read_bytes() == kept
    assert len(hashed) <= len(chunks) + 1


@given(st.binary(max_size=20), st.lists(st.tuples(st.integers(0, 25), st.integers(0, 3),
                                                  st.binary(max_size=3)), max_size=5),
       st.booleans())
def test_splices_done_in_one_pass_are_those_done_one_by_one(data: bytes, splices: list,
                                                            as_logged: bool) -> None:
    """The undo's splices (a log read backwards: each below the one before, inside the
    file) in one pass, and any others one by one: the bytes of doing each in turn."""
    from mailfilter.dedupe.sources import _spliced

    if as_logged:       # descending, none reaching into the one above, inside the file
        top, ordered = len(data), []
        for offset, length, put in sorted(splices, reverse=True):
            offset = min(offset, top)
            length = min(length, top - offset)
            ordered.append((offset, length, put))
            top = offset
        splices = ordered
    expected = data
    for offset, length, put in splices:
        expected = expected[:offset] + put + expected[offset + length:]
    assert _spliced(data, splices) == expected


def test_undoing_many_flags_costs_linear_time(tmp_path: Path) -> None:
    """Each flag taken back copied the whole mbox (16,000 flags: 12 s): now a flag costs
    at most twice as much among 8,000 as among 500."""
    from mailfilter.dedupe.sources import undo_mbox

    def cost(count: int) -> float:
        path = tmp_path / f"flags{count}.mbox"
        chunk = b"From a@example.org Mon Jan  1 00:00:00 2024\nStatus: RO\nSubject: s\n\nb\n\n"
        path.write_bytes(chunk * count)
        entries = [{"op": "mbox-edit", "offset": number * len(chunk) + chunk.index(b"RO"),
                    "old": b"O".hex(), "new": b"RO".hex()} for number in range(count)]
        best = float("inf")
        for _ in range(3):
            path.write_bytes(chunk * count)
            started = time.process_time()
            undo_mbox(path, entries, completed=True)
            best = min(best, time.process_time() - started)
        assert path.read_bytes() == chunk.replace(b"RO", b"O") * count
        return best / count
    small, large = cost(500), cost(8000)
    assert large <= 2 * max(small, 2e-6), (small, large)
