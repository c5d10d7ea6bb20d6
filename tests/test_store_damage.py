"""A damaged LMDB store is refused, never read as an empty one (operations issue).

Before this change one byte flipped in ``data.mdb``'s main-database root made the store
look empty: ``dupfilter-db stats`` said 0 records, ``verify`` "0 records checked: 0
problems", every message was judged unique, and the first writer created a new empty store
inside the damaged file.  A damaged leaf page of the records made ``verify`` die with a
traceback (``lmdb.CorruptedError``).  These tests damage real ``data.mdb`` files the same
ways, reading LMDB's page layout: the two meta pages (0 and 1) each hold the main
database's root page number, the newest one (highest transaction id) is the one in use.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import lmdb
import pytest
from helpers import make_message, paragraph_text
from support.cli import DUPFILTER, DUPFILTER_DB, installed, run

from mailfilter.config import load_settings
from mailfilter.engine import Engine
from mailfilter.store import StoreDamaged
from mailfilter.store.lmdb import _RECORDS, _TALLY

REPO = Path(__file__).resolve().parents[1]
# LMDB's on-disk layout (lmdb/mdb.c, 64-bit): a page header is pgno (8), pad (2), flags
# (2), lower (2), upper (2); a meta page's MDB_meta follows it: magic, version (4 each),
# address, map size (8 each), then the free and main databases' MDB_db (48 bytes each:
# pad 4, flags 2, depth 2, branch, leaf and overflow pages, entries, root 8 each), the
# last page and the transaction id.
_HEADER = struct.Struct("<QHHHH")
_MAIN_DB = 16 + 24 + 48
_ROOT_IN_DB = 40
_TXNID = _MAIN_DB + 48 + 8
_BRANCH, _LEAF = 0x01, 0x02
_INVALID = 0xFFFF_FFFF_FFFF_FFFF


@pytest.fixture(autouse=True)
def _installed() -> None:
    assert installed(), "install the project first: pip install -e ."


def fill(store: Path, count: int, words: int = 120) -> list[bytes]:
    """A store holding ``count`` messages recorded through the normal API; the messages."""
    messages = [make_message(paragraph_text(7000 + n, count=words), message_id=f"<m{n}@x>")
                for n in range(count)]
    with Engine(load_settings(search=False), str(store)) as engine:
        for raw in messages:
            assert engine.check(raw).kind == "unique"
    return messages


def page_size(store: Path) -> int:
    env = lmdb.open(str(store), max_dbs=12, readonly=True, lock=False)
    try:
        return env.stat()["psize"]
    finally:
        env.close()


class DataFile:
    """``data.mdb`` read whole, its pages found as LMDB finds them, changed and written."""

    def __init__(self, store: Path) -> None:
        self.path = store / "data.mdb"
        self.psize = page_size(store)
        self.data = bytearray(self.path.read_bytes())

    def write(self) -> None:
        self.path.write_bytes(bytes(self.data))

    def newest_meta(self) -> int:
        """The offset of the meta page in use (the higher transaction id)."""
        return max((0, self.psize), key=lambda base: struct.unpack_from(
            "<Q", self.data, base + _TXNID)[0])

    def main_root(self) -> int:
        return struct.unpack_from("<Q", self.data, self.newest_meta() + _MAIN_DB + _ROOT_IN_DB)[0]

    def nodes(self, page: int) -> list[tuple[int, bytes, int]]:
        """(node offset, key, data size or child page) of each node of a page."""
        base = page * self.psize
        _, _, _, lower, _ = _HEADER.unpack_from(self.data, base)
        found = []
        for number in range((lower - _HEADER.size) // 2):
            offset = base + struct.unpack_from("<H", self.data, base + 16 + 2 * number)[0]
            low, high, flags, ksize = struct.unpack_from("<HHHH", self.data, offset)
            found.append((offset, bytes(self.data[offset + 8:offset + 8 + ksize]),
                          low | high << 16 | flags << 32))
        return found

    def sub_database_root(self, name: bytes) -> int:
        """The root page of a named sub-database (its MDB_db in the main database's leaf)."""
        for offset, key, _ in self.nodes(self.main_root()):
            if key == name:
                return struct.unpack_from("<Q", self.data, offset + 8 + len(key) + _ROOT_IN_DB)[0]
        raise KeyError(name)

    def leaves(self, root: int) -> list[int]:
        """The leaf pages under ``root``, in key order."""
        flags = _HEADER.unpack_from(self.data, root * self.psize)[2]
        if flags & _LEAF:
            return [root]
        assert flags & _BRANCH, flags
        return [leaf for _, _, child in self.nodes(root) for leaf in self.leaves(child & (
            (1 << 48) - 1))]

    def break_page(self, page: int) -> None:
        """The page's flags say it is no page of a B-tree (one byte changed)."""
        self.data[page * self.psize + 10] = 0


def root_pointer_lost(data: DataFile) -> None:
    """The meta page in use points the main database nowhere."""
    struct.pack_into("<Q", data.data, data.newest_meta() + _MAIN_DB + _ROOT_IN_DB, _INVALID)


def root_says_no_entries(data: DataFile) -> None:
    """One byte of the main root's header: its node count reads as none."""
    data.data[data.main_root() * data.psize + 12] = _HEADER.size


def root_not_a_page(data: DataFile) -> None:
    """One byte of the main root's header: its flags say no B-tree page."""
    data.break_page(data.main_root())


MAIN_ROOT_DAMAGE: dict[str, Callable[[DataFile], None]] = {
    "root pointer lost": root_pointer_lost, "root says no entries": root_says_no_entries,
    "root not a page": root_not_a_page}


def damage(store: Path, how: Callable[[DataFile], None]) -> str:
    """Damage the closed store's data.mdb; its digest afterwards."""
    data = DataFile(store)
    how(data)
    data.write()
    return digest(store)


def digest(store: Path) -> str:
    return hashlib.sha256((store / "data.mdb").read_bytes()).hexdigest()


def cli(*args: str, stdin: bytes = b"") -> tuple[int, str, str]:
    done = run(*args, stdin=stdin)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def meta_count(store: Path) -> tuple[int, int] | None:
    """meta's (records, next_id counted at), None without the key."""
    env = lmdb.open(str(store), max_dbs=12, readonly=True, lock=False)
    try:
        meta = env.open_db(b"meta", create=False)
        with env.begin() as txn:
            raw = txn.get(_RECORDS, db=meta)
        return None if raw is None else _TALLY.unpack(raw)
    finally:
        env.close()


# ------------------------------------------------------------------ the main database's root

@pytest.mark.parametrize("how", MAIN_ROOT_DAMAGE.values(), ids=MAIN_ROOT_DAMAGE.keys())
def test_a_damaged_main_root_is_refused_and_left_as_it_is(
        tmp_path: Path, how: Callable[[DataFile], None]) -> None:
    """Before: the store opened as an empty one (0 records) and a writer created new empty
    sub-databases in the damaged file.  Now every open, read-only or for writing, is
    refused with the damaged-store message, and data.mdb is not written."""
    store = tmp_path / "store"
    fill(store, 5)
    after = damage(store, how)
    settings = load_settings(search=False)
    for options in ({}, {"readonly": True, "create": False}):
        with pytest.raises(StoreDamaged) as refused:
            Engine(settings, str(store), **options)
        text = str(refused.value)
        assert f"the store at {store} looks damaged" in text, text
        assert "mdb_copy" in text and "move it aside" in text, text
    assert digest(store) == after


@pytest.mark.parametrize("how", MAIN_ROOT_DAMAGE.values(), ids=MAIN_ROOT_DAMAGE.keys())
def test_the_pipe_does_not_take_a_damaged_store_for_an_empty_one(
        tmp_path: Path, how: Callable[[DataFile], None]) -> None:
    """Before: a copy of a stored message piped through `dupfilter --check` exited 1 with
    nothing on stderr (judged unique: the store looked empty), `--tag` wrote
    "X-Dupfilter: unique".  Now the message is unchecked, as on any store error: --check
    exits 1 and --tag passes it through without the header, and procmail's log says the
    store looks damaged."""
    store = tmp_path / "store"
    messages = fill(store, 5)
    after = damage(store, how)
    code, out, err = cli(DUPFILTER, "--db", str(store), "--check", stdin=messages[2])
    assert code == 1 and out == "", (code, out, err)
    assert "looks damaged" in err and "message not checked" in err, err
    code, out, err = cli(DUPFILTER, "--db", str(store), "--tag", stdin=messages[2])
    assert code == 0 and "X-Dupfilter" not in out and "<m2@x>" in out, (code, err)
    assert "looks damaged" in err and "passed through unchecked" in err, err
    assert digest(store) == after


@pytest.mark.parametrize("how", MAIN_ROOT_DAMAGE.values(), ids=MAIN_ROOT_DAMAGE.keys())
def test_stats_and_verify_on_a_damaged_main_root(tmp_path: Path,
                                                  how: Callable[[DataFile], None]) -> None:
    """Before: `stats` said "records 0" and `verify` "0 records checked: 0 problems" (exit
    0), or, for a root that was no page, both ended in "cannot open store ...
    MDB_CORRUPTED" with no word on what to do.  Now both exit non-zero, without a
    traceback, and say how to restore from an mdb_copy backup."""
    store = tmp_path / "store"
    fill(store, 5)
    damage(store, how)
    code, out, err = cli(DUPFILTER_DB, "--db", str(store), "stats")
    assert code != 0 and "Traceback" not in err, (code, out, err)
    assert "looks damaged" in err and "mdb_copy" in err, err
    code, out, err = cli(DUPFILTER_DB, "--db", str(store), "verify")
    assert code == 1 and "Traceback" not in err, (code, out, err)
    assert "looks damaged" in out and f"mdb_copy -c {store.resolve()} BACKUP" in out, out


# ------------------------------------------------------------------ a leaf of the records

def test_a_damaged_first_leaf_of_the_records_is_refused_at_open(tmp_path: Path) -> None:
    """Before: the store opened; `verify` died with a traceback (lmdb.CorruptedError) and
    `stats` showed the records as if nothing were wrong.  The open reads the first and the
    last record (O(1)): now it is refused, and stats and verify say so with no
    traceback."""
    store = tmp_path / "store"
    fill(store, 60)
    data = DataFile(store)
    leaves = data.leaves(data.sub_database_root(b"docs"))
    assert len(leaves) >= 3, leaves
    data.break_page(leaves[0])
    data.write()
    with pytest.raises(StoreDamaged, match="its records cannot be read"):
        Engine(load_settings(search=False), str(store), readonly=True, create=False)
    for command in ("stats", "verify"):
        code, out, err = cli(DUPFILTER_DB, "--db", str(store), command)
        assert code != 0 and "Traceback" not in err, (command, code, out, err)
        assert "looks damaged" in out + err and "mdb_copy" in out + err, (command, out, err)


def test_verify_lists_a_damaged_leaf_in_the_middle_of_the_records(tmp_path: Path) -> None:
    """Before: `dupfilter-db verify` died (LMDB aborted it stepping onto the leaf: exit
    -6) and the pipe logged a bare "MDB_CORRUPTED".  A leaf between the first and the last
    is not read at open (that would cost a walk): verify lists it, which records could not
    be read, and checks the rest (no flood of index entries of the lost records), exits 1
    and says how to restore; a message whose record is on that leaf passes unchecked with
    a log line saying the store looks damaged."""
    store = tmp_path / "store"
    messages = fill(store, 60)
    data = DataFile(store)
    leaves = data.leaves(data.sub_database_root(b"docs"))
    assert len(leaves) >= 3, leaves
    middle = leaves[len(leaves) // 2]
    lost = [int.from_bytes(key, "big") for _, key, _ in data.nodes(middle)]
    data.break_page(middle)
    data.write()
    code, out, err = cli(DUPFILTER_DB, "--db", str(store), "verify")
    assert code == 1 and "Traceback" not in err, (code, out, err)
    problems = out.split("\nto restore")[0].splitlines()
    assert problems[0] == (f"docs: records {lost[0]} to {lost[-1]} cannot be read "
                           "(CorruptedError: MDB_CORRUPTED: Located page was wrong type)"), out
    assert problems[1:] == ["60 records checked: 1 problems"], out
    assert f"mdb_copy -c {store.resolve()} BACKUP" in out
    code, out, err = cli(DUPFILTER_DB, "--db", str(store), "stats")
    assert code == 0 and "Traceback" not in err and "records    60" in out, (code, out, err)
    on_leaf = messages[lost[0] - 1]                 # record ids are 1, 2, ...
    code, out, err = cli(DUPFILTER, "--db", str(store), "--check", stdin=on_leaf)
    assert code == 1 and "looks damaged" in err and "not checked" in err, (code, err)
    elsewhere = messages[0]
    code, out, err = cli(DUPFILTER, "--db", str(store), "--check", stdin=elsewhere)
    assert code == 0 and err == "", (code, err)     # the rest is still checked


def test_verify_lists_a_damaged_index_leaf_where_lmdb_would_abort(tmp_path: Path) -> None:
    """LMDB does not check a leaf it steps onto from its neighbour: walking into a damaged
    one aborts the process (an assertion in mdb_cursor_next, exit -6, no Python error at
    all).  Before: verify died so.  Now the walk runs in a process of its own: the index is
    listed as damaged after the last key it reached, the rest is checked, exit 1."""
    store = tmp_path / "store"
    fill(store, 60)
    data = DataFile(store)
    leaves = data.leaves(data.sub_database_root(b"by_shingle"))
    assert len(leaves) >= 3, leaves
    data.break_page(leaves[len(leaves) // 2])
    data.write()
    code, out, err = cli(DUPFILTER_DB, "--db", str(store), "verify")
    assert code == 1 and "Traceback" not in err and err == "", (code, out, err)
    problems = out.split("\nto restore")[0].splitlines()
    assert re.fullmatch(r"by_shingle: LMDB aborted reading it after key [0-9a-f]+ \(a damaged "
                        r"page; it said: .*Assertion.*\); not checked past there",
                        problems[0]), out
    assert problems[1:] == ["60 records checked: 1 problems"], out
    assert "mdb_copy -c" in out


# ------------------------------------------------------------------ meta's count of records

def test_a_count_that_disagrees_with_the_records_is_refused(tmp_path: Path) -> None:
    """Before: a store whose records sub-database had emptied (its entries gone, meta and
    the indexes still there) opened as an empty store.  Now meta's count of records (5)
    disagrees with what the records hold (0): refused, saying both numbers."""
    store = tmp_path / "store"
    fill(store, 5)
    env = lmdb.open(str(store), max_dbs=12)
    with env.begin(write=True) as txn:
        txn.drop(env.open_db(b"docs", txn=txn), delete=False)
    env.close()
    for options in ({}, {"readonly": True, "create": False}):
        with pytest.raises(StoreDamaged, match="meta says 5 records, found 0"):
            Engine(load_settings(search=False), str(store), **options)


def test_the_count_follows_adds_touches_replace_forget_and_prune(tmp_path: Path) -> None:
    """Before: no count was kept (meta had no `records`).  Now every path that adds or
    removes a record keeps it in its own transaction: copies (touch), new messages,
    replace, forget (the API and `dupfilter-db forget`), prune; the store opens, verifies
    clean (exit 0) and its count is the records' after each."""
    store = tmp_path / "store"
    messages = fill(store, 6)
    settings = load_settings(search=False)

    def agrees(expected: int) -> None:
        assert meta_count(store)[0] == expected
        with Engine(settings, str(store), readonly=True, create=False) as engine:
            assert engine.store.stats()["records"] == expected
            assert engine.store.verify() == []
    agrees(6)
    with Engine(settings, str(store)) as engine:
        assert engine.check(messages[1]).kind == "duplicate"        # touched, not added
        record = engine.store.get(3)
        record.recipients = (42,)
        engine.store.replace(record)
        assert engine.store.forget([2, 999]) == 1
    agrees(5)
    code, out, err = cli(DUPFILTER_DB, "--db", str(store), "forget", "--message-id",
                         "<m4@x>")
    assert code == 0, (out, err)
    agrees(4)
    later = make_message(paragraph_text(99, count=120), message_id="<later@x>")
    with Engine(settings, str(store)) as engine:
        engine.check(later, now=int(time.time()) + 10 * 86400)
        assert engine.store.prune(int(time.time()) + 86400) == 4
    agrees(1)
    code, out, err = cli(DUPFILTER_DB, "--db", str(store), "verify")
    assert code == 0 and out.strip() == "1 records checked: 0 problems", (out, err)


def test_a_store_without_the_count_gets_it_from_its_first_writer(tmp_path: Path) -> None:
    """A store an older dupfilter made has no count: a read-only open skips the check (and
    writes nothing), the first open for writing counts it once.  Before: no count at all
    (the first assertion on meta_count fails)."""
    store = tmp_path / "store"
    fill(store, 4)
    assert meta_count(store) == (4, 5)
    env = lmdb.open(str(store), max_dbs=12)
    with env.begin(write=True) as txn:
        assert txn.delete(_RECORDS, db=env.open_db(b"meta", txn=txn))
    env.close()
    settings = load_settings(search=False)
    with Engine(settings, str(store), readonly=True, create=False) as engine:
        assert engine.store.stats()["records"] == 4
    assert meta_count(store) is None
    with Engine(settings, str(store)):
        pass
    assert meta_count(store) == (4, 5)


def test_records_an_older_dupfilter_added_are_not_taken_for_damage(tmp_path: Path) -> None:
    """An older dupfilter still running beside this one (a daemon not yet restarted after
    an upgrade) adds records without counting them.  Its new `next_id` says the count is
    stale: a read-only open skips the check, a writer counts again.  (Without that, the
    count would disagree and the store be refused as damaged.)"""
    store = tmp_path / "store"
    fill(store, 3)
    env = lmdb.open(str(store), max_dbs=12)
    with env.begin(write=True) as txn:         # what an older _add does to docs and meta
        meta, docs = env.open_db(b"meta", txn=txn), env.open_db(b"docs", txn=txn)
        txn.put((4).to_bytes(8, "big"), txn.get((3).to_bytes(8, "big"), db=docs), db=docs)
        txn.put(b"next_id", (5).to_bytes(8, "big"), db=meta)
    env.close()
    settings = load_settings(search=False)
    with Engine(settings, str(store), readonly=True, create=False) as engine:
        assert engine.store.stats()["records"] == 4
    with Engine(settings, str(store)):
        pass
    assert meta_count(store) == (4, 5)


# ------------------------------------------------------------------ the daemons, the docs

def test_a_milter_on_a_damaged_store_says_why_in_status_and_log(tmp_path: Path) -> None:
    """Before: the milter opened the damaged store as an empty one, status said OK and
    every message was unique.  Now the store is not opened: messages get on_error
    (accept), and `dupfilter-db status` and the log say the store looks damaged."""
    from support.daemons import MilterDaemon
    from test_milter_protocol import body_of, headers
    store = tmp_path / "store"
    fill(store, 5)
    damage(store, root_pointer_lost)
    folder = tmp_path / "run"
    folder.mkdir()
    daemon = MilterDaemon(tmp_path, db=store, args=("--allow-root", "--status-dir",
                                                    str(folder)))
    with daemon:
        with daemon.client() as client:
            client.message("a@example.test", ["b@example.test"], headers("d1"), body_of(),
                           queue_id="D1")
        (line,) = daemon.wait_lines(1)
        assert line.get("verdict") != "unique" and line["action"] == "accept", line
        time.sleep(1.5)                     # the status file is rewritten within 0.5 s
        code, out, err = cli(DUPFILTER_DB, "status", "--status-dir", str(folder))
        assert code == 2, out + err
        assert f"CRITICAL: store not open: StoreDamaged: the store at {store} looks damaged" \
            in out, out
        assert "messages get on_error=accept" in out, out
        assert re.search(r"cannot open the store at .*looks damaged", daemon.log_text())


def test_the_restore_the_docs_and_verify_give_runs_as_written(tmp_path: Path) -> None:
    """docs/operations.md, "A damaged store", and `verify`'s own advice: the backup taken
    with mdb_copy, then the commands as printed (paths and owner of this test), bring the
    store back; it verifies clean and holds its records again."""
    store, backup = tmp_path / "dupfilter", tmp_path / "backup"
    fill(store, 5)
    section = (REPO / "docs" / "operations.md").read_text().split("## A damaged store")[1]
    section = section.split("\n## ")[0]
    commands = [" ".join(code.split()) for code in re.findall(r"`([^`]+)`", section)]
    assert "dupfilter-db verify" in commands
    backup_command = next(c for c in commands if c.startswith("mdb_copy -c"))
    assert backup_command == "mdb_copy -c /var/lib/dupfilter /backup/dupfilter", commands
    backup.mkdir()
    subprocess.run(backup_command.replace("/var/lib/dupfilter", str(store)).replace(
        "/backup/dupfilter", str(backup)).split(), check=True)
    damage(store, root_not_a_page)
    code, out, err = cli(DUPFILTER_DB, "--db", str(store), "verify")
    assert code == 1
    advice = [line.strip() for line in out.splitlines() if line.startswith("  ")]
    assert [line.split()[0] for line in advice] == ["mv", "install", "install", "runuser"]
    for line in advice:
        done = subprocess.run(line.replace("BACKUP", str(backup)), shell=True,
                              capture_output=True, text=True)
        assert done.returncode == 0, (line, done.stdout, done.stderr)
    assert done.stdout.strip() == "5 records checked: 0 problems"
    assert (tmp_path / "dupfilter.damaged" / "data.mdb").is_file()
    # The documented restore, word for word but the paths and the owner.
    shutil.rmtree(store)
    ran = []
    for command in commands:
        if command.split()[0] not in ("mv", "install", "runuser"):
            continue
        line = command.replace("/var/lib/dupfilter", str(store)).replace(
            "/backup/dupfilter", str(backup)).replace("dupfilter:dupfilter", "root:root")
        line = re.sub(r"(-[ogu]) dupfilter\b", r"\1 root", line)
        if line.startswith("mv"):
            continue                    # the damaged store is already aside
        done = subprocess.run(line, shell=True, capture_output=True, text=True)
        assert done.returncode == 0, (line, done.stdout, done.stderr)
        ran.append(line.split()[0])
    assert ran == ["install", "install", "runuser"]
    assert done.stdout.strip() == "5 records checked: 0 problems"
    stats = json.loads(cli(DUPFILTER_DB, "--db", str(store), "stats", "--json")[1])
    assert stats["records"] == 5


def test_verify_on_damaged_redis_values_lists_them(redis_url: str, redis_server) -> None:  # noqa: ANN001
    """The Redis store's verify: a record cut short and a time-index member that is no
    number are listed (exit 1, no traceback).  Before: the member ended `verify` at once
    (exit 2, a bare "invalid literal for int()", nothing else checked or said)."""
    with Engine(load_settings(search=False), redis_url) as engine:
        for n in range(3):
            engine.check(make_message(paragraph_text(7100 + n), message_id=f"<r{n}@x>"))
    with redis_server.client() as client:
        segment = next(key for key in client.scan_iter(match=b"dupfilter:{0}x*"))
        field = next(f for f in client.hkeys(segment) if f[:1] == b"d" and len(f) > 4)
        client.hset(segment, field, b"\x03\x00")
        client.zadd(b"dupfilter:{0}t", {b"not-a-number": 1})
    code, out, err = cli(DUPFILTER_DB, "--db", redis_url, "verify")
    assert code == 1 and "Traceback" not in err, (code, out, err)
    assert "time index member b'not-a-number' is no record id" in out, out
    assert f"record {int.from_bytes(field[1:], 'big')} cannot be decoded" in out, out
    assert "mdb_copy" not in out                     # the LMDB advice is for LMDB stores
