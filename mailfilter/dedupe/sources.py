"""The folders ``dedupe`` reads and changes: Maildir (with Maildir++ sub-folders), mbox and IMAP.

Every change follows one rule: a message is always in its source or its target.  A Maildir
message is hard-linked into its target before its old name goes; an mbox message is
appended (and synced) to its target before the source is rewritten, through a temporary
file renamed over it; IMAP uses MOVE, or COPY then ``\\Deleted``.  Each change is written
to the undo log (``log``) before it is made, so that a log cut short by a crash still names
everything that may have moved.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import imaplib
import logging
import os
import re
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Protocol
from urllib.parse import SplitResult, unquote, urlsplit

from mailfilter.message import first_look
from mailfilter.normalise import first_values, read_headers
from mailfilter.sources import _MBOX_SEPARATOR, _MBOXRD_QUOTED, is_maildir

# The undo log: one entry, or several synced to disk at once, before the change they name.
Log = Callable[[dict[str, object] | list[dict[str, object]]], None]
PASSWORD_ENV = "DUPFILTER_IMAP_PASSWORD"
MAILDIR_FLAGGED = "F"
# Whole IMAP messages fetched per command: at most ImapOptions.batch, and at most this many
# bytes (by their RFC822.SIZE) unless one message alone is larger.
FETCH_BYTES = 16 * 1024 * 1024
# Maildir files moved per batch: their undo log lines synced once, then every link, one
# sync of each folder, every unlink.
MAILDIR_BATCH = 64
IMAP_FLAGGED = "\\Flagged"


class SourceError(ValueError):
    """A source that cannot be read or changed as asked (said to the user, no traceback)."""


@dataclass(slots=True)
class StoredMessage:
    """One message as a folder holds it: ``key`` names it there (a Maildir file, an mbox
    ordinal, an IMAP ``UIDVALIDITY:UID``); ``received`` is when it was delivered, if known."""

    folder: Folder
    key: str
    size: int
    received: float | None
    raw: bytes


@dataclass(frozen=True, slots=True)
class Handle:
    """What an action needs of a message it was given: its key in the folder, and the
    SHA-256 and Message-ID the undo log keeps to find it again."""

    key: str
    sha256: str
    message_id: str | None


class Folder(Protocol):
    """A folder dedupe can read and change."""

    name: str       # what --keep folder:NAME and --across-folders compare
    label: str      # what a report shows

    def count(self) -> int: ...

    def message_ids(self) -> Iterator[tuple[str, str | None]]: ...

    def messages(self, only: set[str] | None = None) -> Iterator[StoredMessage]: ...

    def target_label(self, target: str) -> str: ...

    def move(self, messages: list[Handle], target: str, log: Log) -> None: ...

    def flag(self, messages: list[Handle], log: Log) -> None: ...

    def delete(self, messages: list[Handle], log: Log) -> None: ...


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------- Maildir

def _maildir_info(name: str) -> tuple[str, str]:
    """A Maildir file name split into its unique part and its flags (``:2,FS``)."""
    base, sep, info = name.partition(":2,")
    return base, info if sep else ""


def make_maildir(path: Path, plusplus: bool) -> None:
    for sub in ("tmp", "new", "cur"):
        (path / sub).mkdir(parents=True, exist_ok=True, mode=0o700)
    if plusplus:
        (path / "maildirfolder").touch()


def relink(source: Path, target: Path) -> None:
    """Give ``source`` the name ``target`` with the message always under one of them: a
    hard link, then the old name goes (a copy synced and renamed in, across filesystems)."""
    relink_all([(source, target)])


def relink_all(pairs: list[tuple[Path, Path]]) -> None:
    """:func:`relink` for many files: every new name made and its folder synced before any
    old name goes (two folder syncs a batch rather than two a file)."""
    for source, target in pairs:
        _link_or_copy(source, target)
    for folder in {target.parent for _source, target in pairs}:
        _fsync_dir(folder)
    for source, _target in pairs:
        os.unlink(source)
    for folder in {source.parent for source, _target in pairs}:
        _fsync_dir(folder)


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError as error:
        if error.errno != errno.EXDEV:
            raise
        temporary = target.parent.parent / "tmp" / f".{target.name}.{os.getpid()}"
        with open(source, "rb") as reading, open(temporary, "xb") as writing:
            writing.write(reading.read())
            writing.flush()
            os.fsync(writing.fileno())
        os.rename(temporary, target)


class MaildirFolder:
    """One Maildir folder; ``root`` is the account's top Maildir (Maildir++: sub-folders
    are ``root/.Name``, and so is the target of a move)."""

    def __init__(self, path: Path, name: str, root: Path) -> None:
        self.path, self.name, self.root = path, name, root
        self.label = str(path)

    def _files(self) -> list[tuple[str, Path]]:
        found = []
        for sub in ("cur", "new"):
            for entry in sorted(os.scandir(self.path / sub), key=lambda e: e.name):
                if entry.is_file() and not entry.name.startswith("."):
                    found.append((f"{sub}/{entry.name}", Path(entry.path)))
        return found

    def count(self) -> int:
        return len(self._files())

    def message_ids(self) -> Iterator[tuple[str, str | None]]:
        for key, path in self._files():
            try:
                yield key, first_look(path.read_bytes()).message_id
            except FileNotFoundError:
                continue

    def messages(self, only: set[str] | None = None) -> Iterator[StoredMessage]:
        for key, path in self._files():
            if only is not None and key not in only:
                continue
            try:
                raw = path.read_bytes()
                received = path.stat().st_mtime
            except FileNotFoundError:       # moved meanwhile (by a client): not ours now
                continue
            yield StoredMessage(self, key, len(raw), received, raw)

    def _target(self, target: str) -> Path:
        return Path(target) if "/" in target else self.root / f".{target}"

    def target_label(self, target: str) -> str:
        return str(self._target(target))

    def move(self, messages: list[Handle], target: str, log: Log) -> None:
        folder = self._target(target)
        if folder.resolve() == self.path.resolve():
            raise SourceError(f"--to {target} is the folder being cleaned ({self.path})")
        make_maildir(folder, plusplus="/" not in target)
        for start in range(0, len(messages), MAILDIR_BATCH):
            pairs = []
            for message in messages[start:start + MAILDIR_BATCH]:
                source = self.path / message.key
                sub, name = message.key.split("/", 1)
                destination = folder / sub / name
                if destination.exists():
                    destination = folder / sub / f"{name}.dedupe{os.getpid()}"
                pairs.append((source, destination))
            log([{"op": "rename", "from": str(source), "to": str(destination)}
                 for source, destination in pairs])
            relink_all(pairs)

    def flag(self, messages: list[Handle], log: Log) -> None:
        for message in messages:
            source = self.path / message.key
            base, info = _maildir_info(source.name)
            if MAILDIR_FLAGGED in info:
                continue
            flags = "".join(sorted(info + MAILDIR_FLAGGED))
            destination = self.path / "cur" / f"{base}:2,{flags}"
            log({"op": "rename", "from": str(source), "to": str(destination)})
            os.rename(source, destination)
            _fsync_dir(destination.parent)

    def delete(self, messages: list[Handle], log: Log) -> None:
        for message in messages:
            source = self.path / message.key
            log({"op": "delete", "path": str(source), "sha256": message.sha256})
            os.unlink(source)
        _fsync_dir(self.path / "cur")
        _fsync_dir(self.path / "new")


def maildir_folders(path: Path, exclude: str | None) -> list[MaildirFolder]:
    """The Maildir at ``path`` and its Maildir++ sub-folders (``.Name``), the target of a
    move (``exclude``) left out; a sub-folder named itself is that folder alone."""
    path = path.resolve()
    if path.name.startswith(".") and is_maildir(path.parent):
        return [MaildirFolder(path, path.name[1:], path.parent)]
    folders = [MaildirFolder(path, "INBOX", path)]
    for entry in sorted(path.iterdir()):
        if entry.name.startswith(".") and entry.name not in (".", "..") \
                and is_maildir(entry) and entry.name[1:] != exclude:
            folders.append(MaildirFolder(entry, entry.name[1:], path))
    return folders


def undo_rename(entry: dict[str, object]) -> str:
    """Put back one renamed or moved Maildir file."""
    source, target = Path(str(entry["from"])), Path(str(entry["to"]))
    if source.exists():
        if target.exists():     # interrupted between link and unlink: two names, one file
            if os.path.samefile(source, target):
                os.unlink(target)
                return f"restored {source}"
        return f"already in place: {source}"
    if not target.exists():
        return f"MISSING: {target} (and not at {source})"
    if source.parent != target.parent:
        relink(target, source)
    else:
        os.rename(target, source)
    return f"restored {source}"


# ---------------------------------------------------------------------------- mbox

# Dotlocks older than this are stale (procmail's default is 17 minutes; mutt asks).
STALE_DOTLOCK = 17 * 60
LOCK_TIMEOUT = 60.0


@contextlib.contextmanager
def mbox_locked(path: Path, *, timeout: float = LOCK_TIMEOUT) -> Iterator[None]:
    """Hold ``path`` the way procmail and mutt lock an mbox: a ``path.lock`` dotlock (made
    with a unique file and link(2), safe over NFS) and an fcntl write lock.

    A dotlock is stale after ``STALE_DOTLOCK`` (as procmail's), or at once when it is one
    of ours (it holds ``dupfilter PID@HOST``) whose process on this host is gone: a run
    killed with SIGKILL does not make the next one wait."""
    lock = path.with_name(path.name + ".lock")
    host = socket.gethostname()
    unique = path.with_name(f".{path.name}.lock.{host}.{os.getpid()}")
    deadline = time.monotonic() + timeout
    unique.write_bytes(f"dupfilter {os.getpid()}@{host}\n".encode())
    try:
        while True:
            try:
                os.link(unique, lock)
                break
            except FileExistsError:
                with contextlib.suppress(FileNotFoundError):
                    if time.time() - lock.stat().st_mtime > STALE_DOTLOCK \
                            or _dead_owner(lock, host):
                        lock.unlink()
                        continue
                if time.monotonic() > deadline:
                    raise SourceError(f"{path}: locked by another program ({lock})") from None
                time.sleep(0.2)
    finally:
        unique.unlink()
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            while True:
                try:
                    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise SourceError(f"{path}: locked by another program (fcntl)") \
                            from None
                    time.sleep(0.2)
            yield
        finally:
            os.close(fd)
    finally:
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()


def _dead_owner(lock: Path, host: str) -> bool:
    """True when ``lock`` is a dotlock of a dupfilter process of this host that is gone."""
    words = lock.read_bytes()[:200].split()
    if len(words) != 2 or words[0] != b"dupfilter":
        return False
    pid, _, owner = words[1].decode("ascii", "replace").partition("@")
    if owner != host or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def mbox_chunks(data: bytes) -> list[tuple[int, int]]:
    """(offset, length) of each message of an mbox, its ``From `` line and the blank line
    after it included, so that the chunks and what precedes the first make the whole file."""
    starts = [m.start(1) for m in _MBOX_SEPARATOR.finditer(data)]
    ends = starts[1:] + [len(data)]
    return [(start, end - start) for start, end in zip(starts, ends, strict=True)]


def mbox_message(chunk: bytes) -> bytes:
    """The message in an mbox chunk: no ``From `` line, no separating blank line,
    ``>From `` unquoted (mboxrd)."""
    body = chunk[chunk.find(b"\n") + 1:]
    if body.endswith(b"\n\n"):
        body = body[:-1]
    return _MBOXRD_QUOTED.sub(rb"\1", body)


def _from_line_time(chunk: bytes) -> float | None:
    words = chunk[:chunk.find(b"\n")].decode("ascii", "replace").split()
    try:
        return time.mktime(time.strptime(" ".join(words[-5:]), "%a %b %d %H:%M:%S %Y"))
    except (ValueError, OverflowError):
        return None


def rewrite_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` at once: a synced temporary file renamed over it, with
    the old file's mode and owner."""
    before = path.stat()
    temporary = path.with_name(f".{path.name}.dedupe.{os.getpid()}")
    with open(temporary, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    os.chmod(temporary, before.st_mode & 0o7777)
    with contextlib.suppress(PermissionError):
        os.chown(temporary, before.st_uid, before.st_gid)
    os.rename(temporary, path)
    _fsync_dir(path.parent)


def _separated(tail: bytes, chunk: bytes) -> tuple[bytes, bytes]:
    """What must go before ``chunk`` after ``tail`` (an mbox's end) and after it, so that
    each message ends in a blank line."""
    before = b"" if not tail or tail.endswith(b"\n\n") else (
        b"\n" if tail.endswith(b"\n") else b"\n\n")
    after = b"" if chunk.endswith(b"\n\n") else (b"\n" if chunk.endswith(b"\n") else b"\n\n")
    return before, after


def _flagged_header(chunk: bytes) -> tuple[bytes, bytes] | None:
    """The header block of ``chunk`` (its ``From `` line included) and that block with
    mutt's flagged mark (``X-Status: F``); None when it has the mark already."""
    end = chunk.find(b"\n\n")
    header = chunk if end < 0 else chunk[:end + 1]
    lines = header.split(b"\n")
    for index, line in enumerate(lines):
        if line.lower().startswith(b"x-status:"):
            value = line.split(b":", 1)[1].strip()
            if b"F" in value:
                return None
            lines[index] = b"X-Status: " + value + b"F"
            return header, b"\n".join(lines)
    return header, header + b"X-Status: F\n"


class MboxFolder:
    """One mbox file; the target of a move is an mbox beside it (or a path)."""

    def __init__(self, path: Path) -> None:
        self.path = path.resolve()
        self.name = self.path.name
        self.label = str(self.path)
        self._chunks: dict[str, tuple[int, int, str]] = {}

    def _read(self) -> bytes:
        with mbox_locked(self.path):
            return self.path.read_bytes()

    def count(self) -> int:
        return len(mbox_chunks(self._read()))

    def message_ids(self) -> Iterator[tuple[str, str | None]]:
        data = self._read()
        for number, (offset, length) in enumerate(mbox_chunks(data), 1):
            yield str(number), first_look(mbox_message(data[offset:offset + length])).message_id

    def messages(self, only: set[str] | None = None) -> Iterator[StoredMessage]:
        data = self._read()
        for number, (offset, length) in enumerate(mbox_chunks(data), 1):
            key = str(number)
            if only is not None and key not in only:
                continue
            chunk = data[offset:offset + length]
            self._chunks[key] = (offset, length, sha256(chunk))
            yield StoredMessage(self, key, length, _from_line_time(chunk), mbox_message(chunk))

    def _target(self, target: str) -> Path:
        return Path(target).resolve() if "/" in target else self.path.with_name(target)

    def target_label(self, target: str) -> str:
        return str(self._target(target))

    def _checked(self, data: bytes, messages: list[Handle]
                 ) -> list[tuple[int, int, Handle]]:
        """The messages' places, after checking that the file still holds them there."""
        places = []
        for message in messages:
            offset, length, digest = self._chunks[message.key]
            if sha256(data[offset:offset + length]) != digest:
                raise SourceError(f"{self.path} changed since it was read (other than new "
                                  "mail at its end): run dedupe again")
            places.append((offset, length, message))
        return sorted(places, key=lambda place: place[0])

    def _rewrite(self, messages: list[Handle], log: Log, op: str,
                 before_rewrite: Callable[[bytes, list[tuple[int, int, Handle]]],
                                          list[dict[str, object]]],
                 edit: Callable[[bytes], tuple[bytes, bytes] | None] | None = None) -> None:
        with mbox_locked(self.path):
            data = self.path.read_bytes()
            places = self._checked(data, messages)
            entries = before_rewrite(data, places)
            out, last, shift = [], 0, 0
            for (offset, length, _message), entry in zip(places, entries, strict=True):
                out.append(data[last:offset])
                chunk = data[offset:offset + length]
                entry["offset"] = offset + shift
                if edit is not None:
                    change = edit(chunk)
                    if change is None:
                        out.append(chunk)
                    else:
                        old, new = change
                        entry.update(old=old.hex(), new=new.hex())
                        log(entry)
                        out.append(new + chunk[len(old):])
                        shift += len(new) - len(old)
                else:
                    shift -= length
                    log(entry)
                last = offset + length
            out.append(data[last:])
            rewrite_atomically(self.path, b"".join(out))
            log({"op": "mbox-rewritten", "path": str(self.path), "what": op})

    def move(self, messages: list[Handle], target: str, log: Log) -> None:
        destination = self._target(target)
        if destination == self.path:
            raise SourceError(f"--to {target} is the mbox being cleaned ({self.path})")

        def append(data: bytes, places: list[tuple[int, int, Handle]]
                   ) -> list[dict[str, object]]:
            if not destination.exists():
                destination.touch(mode=self.path.stat().st_mode & 0o666)
            entries = []
            with mbox_locked(destination), open(destination, "ab") as out:
                tail = destination.read_bytes()[-2:]
                for offset, length, _message in places:
                    chunk = data[offset:offset + length]
                    before, after = _separated(tail, chunk)
                    out.write(before + chunk + after)
                    tail = (chunk + after)[-2:]
                    entries.append({"op": "mbox-move", "from": str(self.path),
                                    "to": str(destination), "length": length,
                                    "sha256": sha256(chunk), "padding": after.decode()})
                out.flush()
                os.fsync(out.fileno())
            return entries

        self._rewrite(messages, log, "move", append)

    def flag(self, messages: list[Handle], log: Log) -> None:
        def entries(data: bytes, places: list[tuple[int, int, Handle]]
                    ) -> list[dict[str, object]]:
            return [{"op": "mbox-edit", "path": str(self.path)} for _ in places]

        self._rewrite(messages, log, "flag", entries, edit=_flagged_header)

    def delete(self, messages: list[Handle], log: Log) -> None:
        def entries(data: bytes, places: list[tuple[int, int, Handle]]
                    ) -> list[dict[str, object]]:
            return [{"op": "mbox-delete", "path": str(self.path), "length": length,
                     "sha256": sha256(data[offset:offset + length])}
                    for offset, length, _message in places]

        self._rewrite(messages, log, "delete", entries)


def undo_mbox(path: Path, entries: list[dict[str, object]], completed: bool) -> list[str]:
    """Put back, newest first, what one rewrite did to the mbox ``path``.  When it did not
    complete (``completed`` False: interrupted before its rename) the source is as it was,
    and only the copies already appended to a target are taken out again."""
    said: list[str] = []
    if not completed:
        takes: dict[Path, list[dict[str, object]]] = {}
        for entry in entries:
            if entry["op"] == "mbox-move":
                takes.setdefault(Path(str(entry["to"])), []).append(entry)
        for target, moved in takes.items():
            found = _take_back(target, moved)
            said.append(f"interrupted move: {path} was never rewritten; took {len(found)} "
                        f"copies out of {target}")
        return said
    with mbox_locked(path):
        data = path.read_bytes()
        takes: dict[Path, list[dict[str, object]]] = {}
        edits: list[tuple[int, int, bytes]] = []
        for entry in reversed(entries):
            offset = int(entry["offset"])          # type: ignore[call-overload]
            if entry["op"] == "mbox-edit":
                old, new = bytes.fromhex(str(entry["old"])), bytes.fromhex(str(entry["new"]))
                if data[offset:offset + len(new)] != new:
                    said.append(f"CHANGED since: {path} at byte {offset}, flag left")
                    continue
                edits.append((offset, len(new), old))
                said.append(f"unflagged {path} at byte {offset}")
            elif entry["op"] == "mbox-move":
                takes.setdefault(Path(str(entry["to"])), []).append(entry)
        data = _spliced(data, edits)
        restored: dict[str, bytes] = {}
        for target, moved in takes.items():
            restored.update(_take_back(target, moved))
        inserts: list[tuple[int, int, bytes]] = []
        for entry in reversed(entries):
            if entry["op"] == "mbox-move":
                chunk = restored.get(str(entry["sha256"]))
                if chunk is None:
                    said.append(f"MISSING from {entry['to']}: message {entry['sha256'][:12]}")
                    continue
                offset = int(entry["offset"])      # type: ignore[call-overload]
                inserts.append((offset, 0, chunk))
                said.append(f"restored {path} at byte {offset}")
        rewrite_atomically(path, _spliced(data, inserts))
    return said


def _spliced(data: bytes, splices: list[tuple[int, int, bytes]]) -> bytes:
    """``data`` with each ``(offset, length, bytes put)`` of ``splices`` done in turn, each
    in the bytes the one before left.  A rewrite's log read backwards has each below the
    one before: then in one pass (one splice after another copied the whole file each
    time, 16,000 flags took 12 s), each inside the file; otherwise one by one."""
    if all(lower + length <= upper for (upper, _, _), (lower, length, _)
           in pairwise([(len(data), 0, b""), *splices])):
        pieces, end = [], len(data)
        for offset, length, put in splices:
            pieces += (data[offset + length:end], put)
            end = offset
        pieces.append(data[:end])
        return b"".join(reversed(pieces))
    for offset, length, put in splices:
        data = data[:offset] + put + data[offset + length:]
    return data


def _take_back(target: Path, moved: list[dict[str, object]]) -> dict[str, bytes]:
    """Remove the moved messages from ``target``; their original bytes by digest."""
    wanted = {str(entry["sha256"]): entry for entry in moved}
    # A chunk is a moved message and its padding: looked up by the paddings it ends with
    # and the length left, it is hashed once for each padding, not once for each moved
    # message (16,000 of them took 14 s).  (Several matches: the first moved.)
    order = {digest: number for number, digest in enumerate(wanted)}
    shapes: dict[bytes, dict[int, set[str]]] = {}
    for digest, entry in wanted.items():
        shapes.setdefault(str(entry["padding"]).encode(), {}).setdefault(
            int(entry["length"]), set()).add(digest)      # type: ignore[call-overload]
    found: dict[str, bytes] = {}
    with mbox_locked(target):
        data = target.read_bytes()
        out, last = [], 0
        for offset, length in mbox_chunks(data):
            chunk = data[offset:offset + length]
            matches = []
            for padding, lengths in shapes.items():
                digests = lengths.get(length - len(padding)) if chunk.endswith(padding) \
                    else None
                if digests and (digest := sha256(chunk[:length - len(padding)])) in digests \
                        and digest not in found:
                    matches.append(digest)
            if matches:
                digest = min(matches, key=order.__getitem__)
                found[digest] = chunk[:int(wanted[digest]["length"])]  # type: ignore[call-overload]
                out.append(data[last:offset])
                last = offset + length
        out.append(data[last:])
        rewrite_atomically(target, b"".join(out))
    return found


# ---------------------------------------------------------------------------- IMAP

@dataclass(slots=True)
class ImapOptions:
    """How to reach and treat an IMAP account."""

    password: str | None = None
    ca_file: str | None = None
    rate: float = 0.0               # messages a second at most (0: no bound)
    expunge: bool = False           # EXPUNGE what was marked \\Deleted
    keyword: str = IMAP_FLAGGED     # what --action flag sets
    retries: int = 5                # reconnections before giving up
    batch: int = 500                # messages fetched or changed per command
    writable: bool = False          # the run changes the folders: SELECT, never EXAMINE


def imap_password(password_file: str | None) -> str:
    """The IMAP password: from ``password_file`` (its first line), else the environment."""
    if password_file:
        return Path(password_file).read_text().splitlines()[0] if \
            Path(password_file).read_text() else ""
    password = os.environ.get(PASSWORD_ENV)
    if password is None:
        raise SourceError(f"an IMAP source needs its password: --password-file FILE or "
                          f"${PASSWORD_ENV}")
    return password


class Pace:
    """At most ``rate`` steps a second (a server that throttles or bans busy clients)."""

    def __init__(self, rate: float) -> None:
        self.gap = 1.0 / rate if rate > 0 else 0.0
        self.next = 0.0

    def step(self, count: int = 1) -> None:
        if not self.gap:
            return
        now = time.monotonic()
        if self.next > now:
            time.sleep(self.next - now)
        self.next = max(now, self.next) + self.gap * count


_DROPPED = (OSError, imaplib.IMAP4.abort, EOFError)


def check_imap_url(url: str) -> SplitResult:
    """``url`` split, refused when it is no IMAP URL or carries a password."""
    parts = urlsplit(url)
    if parts.scheme not in ("imap", "imaps") or not parts.hostname:
        raise SourceError(f"{url}: expected imaps://user@host/Folder or imap://…")
    if parts.password is not None:
        raise SourceError(f"{url}: no password in the URL (it would show in ps and "
                          f"shell history): --password-file FILE or ${PASSWORD_ENV}")
    return parts


@dataclass
class ImapAccount:
    """One IMAP login (``imaps://`` TLS, ``imap://`` STARTTLS), reconnected when dropped."""

    url: str
    options: ImapOptions
    host: str = ""
    port: int = 0
    user: str = ""
    tls: bool = True
    folder: str | None = None
    client: object = None
    pace: Pace = field(init=False)
    selected: tuple[str, bool] | None = None

    def __post_init__(self) -> None:
        parts = check_imap_url(self.url)
        self.tls = parts.scheme == "imaps"
        self.host, self.port = parts.hostname, parts.port or (993 if self.tls else 143)
        self.user = unquote(parts.username or os.environ.get("USER", ""))
        self.folder = unquote(parts.path.lstrip("/")) or None
        self.pace = Pace(self.options.rate)
        self.reconnections = 0
        self.exists = 0     # messages in the selected folder, as SELECT said

    @property
    def label(self) -> str:
        return f"{'imaps' if self.tls else 'imap'}://{self.user}@{self.host}:{self.port}"

    def connect(self) -> None:
        from imapclient import IMAPClient
        context = ssl.create_default_context(cafile=self.options.ca_file)
        client = IMAPClient(self.host, port=self.port, ssl=self.tls, ssl_context=context,
                            timeout=60)
        # IMAPClient turns imaplib's debug output on and hands it to its logger: a message
        # formatted and logged per response line (a fifth of a run's CPU on a header pass),
        # for nothing unless that logger shows DEBUG.
        if not logging.getLogger("imapclient.imaplib").isEnabledFor(logging.DEBUG):
            client._imap.debug = 0     # noqa: SLF001 - IMAPClient's imaplib connection
        if not self.tls:
            if not client.has_capability("STARTTLS"):
                client.logout()
                raise SourceError(f"{self.label}: the server offers no STARTTLS; the "
                                  "password is not sent in the clear")
            client.starttls(context)
        try:
            client.login(self.user, self.options.password or "")
        except Exception as error:      # imapclient's LoginError and the like
            raise SourceError(f"{self.label}: login as {self.user} failed: {error}") from None
        self.client = client
        self.selected = None

    def reconnect(self, attempt: int) -> None:
        time.sleep(min(2 ** attempt * 0.2, 10))
        with contextlib.suppress(Exception):
            self.client.shutdown()      # type: ignore[attr-defined]
        self.reconnections += 1
        self.connect()

    def retrying(self, job: Callable[[], object]) -> object:
        """``job`` run again on a fresh connection when the server drops this one."""
        for attempt in range(self.options.retries + 1):
            try:
                if self.client is None:
                    self.connect()
                return job()
            except _DROPPED:
                if attempt == self.options.retries:
                    raise SourceError(f"{self.label}: connection lost {attempt + 1} times; "
                                      "run again to go on (what was done is in the undo "
                                      "log)") from None
                self.reconnect(attempt)
        raise AssertionError("unreachable")

    def select(self, folder: str, readonly: bool) -> int:
        """Select ``folder`` (read-only unless the run changes folders: one SELECT then,
        not an EXAMINE to read and a SELECT to act); its UIDVALIDITY."""
        client = self.client
        readonly = readonly and not self.options.writable
        if self.selected != (folder, readonly):
            response = client.select_folder(folder, readonly=readonly)  # type: ignore[attr-defined]
            self.selected = (folder, readonly)
            self.uidvalidity = int(response[b"UIDVALIDITY"])
            self.exists = int(response.get(b"EXISTS", 1))
        return self.uidvalidity

    def folders(self, exclude: str | None) -> list[ImapFolder]:
        if self.folder is not None:
            return [ImapFolder(self, self.folder)]

        def listed() -> list[ImapFolder]:
            found = []
            skip = {exclude, self.full_name(exclude)} if exclude else set()
            for flags, _delimiter, name in self.client.list_folders():  # type: ignore[attr-defined]
                if b"\\Noselect" in flags or b"\\NonExistent" in flags or name in skip:
                    continue
                found.append(ImapFolder(self, name))
            return found

        return self.retrying(listed)        # type: ignore[return-value]

    def full_name(self, name: str) -> str:
        """``name`` as this server spells a folder of the user's: under the personal
        namespace's prefix (``INBOX.`` on Courier and Cyrus) unless it exists as it is or
        has that prefix already."""
        def spelled() -> str:
            client = self.client
            if client.folder_exists(name) or not client.has_capability(  # type: ignore[attr-defined]
                    "NAMESPACE"):
                return name
            personal = client.namespace().personal  # type: ignore[attr-defined]
            prefix = personal[0][0] if personal else ""
            return name if not prefix or name.startswith(prefix) else prefix + name
        return str(self.retrying(spelled))

    def ensure_folder(self, name: str) -> str:
        """The folder ``name`` (see :meth:`full_name`), created when missing."""
        full = self.full_name(name)

        def ensure() -> None:
            if not self.client.folder_exists(full):     # type: ignore[attr-defined]
                self.client.create_folder(full)         # type: ignore[attr-defined]
        self.retrying(ensure)
        return full

    def close(self) -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.logout()    # type: ignore[attr-defined]
            self.client = None


_UID = re.compile(rb"\bUID (\d+)")
_SIZE = re.compile(rb"\bRFC822\.SIZE (\d+)")
_FLAGS = re.compile(rb"\bFLAGS \(([^)]*)\)")


def uid_set(uids: list[int]) -> str:
    """``uids`` as an IMAP sequence set of ranges (``1:500,502``): one short command
    however many messages it names."""
    ranges: list[str] = []
    ordered = sorted(uids)
    start = 0
    for index in range(1, len(ordered) + 1):
        if index == len(ordered) or ordered[index] != ordered[index - 1] + 1:
            first, last = ordered[start], ordered[index - 1]
            ranges.append(str(first) if first == last else f"{first}:{last}")
            start = index
    return ",".join(ranges)


def raw_fetch(client: object, uids: list[int] | str, items: str
              ) -> Iterator[tuple[int, bytes, bytes]]:
    """(UID, the rest of its response, its literal) for each message of a ``UID FETCH``
    of one literal item, read by imaplib alone: IMAPClient's response parser took three
    times imaplib's time for the Message-IDs of a folder.  A FETCH the server volunteers
    without a literal (another client's flag change) is passed over."""
    imap = client._imap     # type: ignore[attr-defined]  # IMAPClient's imaplib connection
    status, data = imap.uid("FETCH", uids if isinstance(uids, str) else uid_set(uids), items)
    if status != "OK":
        raise SourceError(f"UID FETCH failed: {data!r}"[:300])
    for index, item in enumerate(data):
        if not isinstance(item, tuple):
            continue
        head, literal = item
        after = data[index + 1] if index + 1 < len(data) else b""
        rest = head + (after if isinstance(after, bytes) else b"")
        found = _UID.search(rest)
        if found is not None:
            yield int(found.group(1)), rest, literal


class ImapFolder:
    """One IMAP folder; messages are named by UIDVALIDITY and UID, so that a run that
    reconnects (or a later run) knows them again, and a folder renumbered meanwhile
    (another UIDVALIDITY) is not touched."""

    def __init__(self, account: ImapAccount, name: str) -> None:
        self.account, self.name = account, name
        self.label = f"{account.label}/{name}"
        self.uidvalidity: int | None = None
        self._sizes: dict[int, int] = {}      # UID → RFC822.SIZE, from message_ids

    def _uids(self) -> list[int]:
        def search() -> list[int]:
            validity = self.account.select(self.name, readonly=True)
            if self.uidvalidity is None:
                self.uidvalidity = validity
            elif validity != self.uidvalidity:
                raise SourceError(f"{self.label}: UIDVALIDITY changed during the run")
            return sorted(self.account.client.search(["NOT", "DELETED"]))  # type: ignore[attr-defined]
        return self.account.retrying(search)    # type: ignore[return-value]

    def count(self) -> int:
        return len(self._uids())

    def message_ids(self) -> Iterator[tuple[str, str | None]]:
        """The Message-ID of every message not marked ``\\Deleted``: one command for the
        whole folder (its flags, sizes and that one header field)."""
        def fetch() -> list[tuple[int, bytes, bytes]]:
            validity = self.account.select(self.name, readonly=True)
            if self.uidvalidity is None:
                self.uidvalidity = validity
            self._uids_checked()
            if not self.account.exists:
                return []
            self.account.pace.step()
            return list(raw_fetch(self.account.client, "1:*",
                                  "(FLAGS RFC822.SIZE BODY.PEEK[HEADER.FIELDS (MESSAGE-ID)])"))

        fetched: list[tuple[int, bytes, bytes]] = self.account.retrying(fetch)  # type: ignore[assignment]
        for uid, rest, header in sorted(fetched):
            flags = _FLAGS.search(rest)
            if flags is not None and b"\\deleted" in flags.group(1).lower():
                continue
            size = _SIZE.search(rest)
            if size is not None:
                self._sizes[uid] = int(size.group(1))
            fields = first_values(read_headers(header.replace(b"\r\n", b"\n")))
            yield f"{self.uidvalidity}:{uid}", fields.get("message-id") or None

    def messages(self, only: set[str] | None = None) -> Iterator[StoredMessage]:
        """The messages (``only``: those keys of :meth:`message_ids`, without searching the
        folder again), a few megabytes a command."""
        if only is not None and self.uidvalidity is not None:
            prefix = f"{self.uidvalidity}:"
            uids = sorted(int(key[len(prefix):]) for key in only if key.startswith(prefix))
        else:
            uids = self._uids()
        batch = self.account.options.batch
        done = 0
        while done < len(uids):
            wanted, size = [], 0
            for uid in uids[done:done + batch]:
                size += self._sizes.get(uid, 0)
                if wanted and size > FETCH_BYTES:
                    break
                wanted.append(uid)

            def fetch(wanted: list[int] = wanted) -> dict[int, tuple[bytes, bytes]]:
                self._uids_checked()
                self.account.pace.step(len(wanted))
                return {uid: (rest, raw) for uid, rest, raw in raw_fetch(
                    self.account.client, wanted, "(INTERNALDATE BODY.PEEK[])")}

            fetched: dict[int, tuple[bytes, bytes]] = self.account.retrying(  # type: ignore[assignment]
                fetch)
            for uid in wanted:
                item = fetched.get(uid)
                if item is None:            # expunged meanwhile by another client
                    continue
                rest, raw = item
                date = imaplib.Internaldate2tuple(rest)
                received = time.mktime(date) if date is not None else None
                yield StoredMessage(self, f"{self.uidvalidity}:{uid}", len(raw), received, raw)
            done += len(wanted)

    def _uids_checked(self, readonly: bool = True) -> None:
        validity = self.account.select(self.name, readonly=readonly)
        if validity != self.uidvalidity:
            raise SourceError(f"{self.label}: UIDVALIDITY is now {validity}, was "
                              f"{self.uidvalidity}: the folder was renumbered, nothing done")

    def target_label(self, target: str) -> str:
        return f"{self.account.label}/{target}"

    def _each(self, messages: list[Handle], entry: Callable[[int], dict[str, object]],
              act: Callable[[list[int]], None], log: Log) -> None:
        """``act`` on the messages' UIDs, a batch a command (at most ``rate`` UIDs, so
        that one command stays within the bound), each batch logged first; after a
        reconnection only the UIDs still there (not yet done) are acted on again."""
        uids = [int(message.key.split(":")[1]) for message in messages]
        by_uid = {int(m.key.split(":")[1]): m for m in messages}
        rate = self.account.options.rate
        step = min(self.account.options.batch, max(1, int(rate))) if rate else \
            self.account.options.batch
        for start in range(0, len(uids), step):
            chunk = uids[start:start + step]
            log([entry(uid) | {"message_id": by_uid[uid].message_id,
                               "sha256": by_uid[uid].sha256} for uid in chunk])

            def once(chunk: list[int] = chunk) -> None:
                self._uids_checked(readonly=False)
                self.account.pace.step(len(chunk))
                todo = chunk
                if self.account.reconnections:      # some may be done already
                    there = set(self.account.client.search(  # type: ignore[attr-defined]
                        ["UID", ",".join(map(str, chunk)), "NOT", "DELETED"]))
                    todo = [uid for uid in chunk if uid in there]
                if todo:
                    act(todo)

            self.account.retrying(once)
        if self.account.options.expunge:
            self.account.retrying(lambda: self._expunge(uids))

    def _expunge(self, uids: list[int]) -> None:
        self._uids_checked(readonly=False)
        client = self.account.client
        if client.has_capability("UIDPLUS"):    # type: ignore[attr-defined]
            client.uid_expunge(uids)            # type: ignore[attr-defined]
        else:   # asked for (--expunge --yes): the folder's other \Deleted messages go too
            client.expunge()                    # type: ignore[attr-defined]

    def _base(self, op: str, uid: int) -> dict[str, object]:
        return {"op": op, "account": self.account.label, "folder": self.name,
                "uidvalidity": self.uidvalidity, "uid": uid}

    def move(self, messages: list[Handle], target: str, log: Log) -> None:
        if target == self.name:
            raise SourceError(f"--to {target} is the folder being cleaned")
        target = self.account.ensure_folder(target)
        if target == self.name:
            raise SourceError(f"--to {target} is the folder being cleaned")
        client = self.account

        def act(uids: list[int]) -> None:
            if client.client.has_capability("MOVE"):    # type: ignore[attr-defined]
                client.client.move(uids, target)        # type: ignore[attr-defined]
            else:
                client.client.copy(uids, target)        # type: ignore[attr-defined]
                client.client.add_flags(uids, [b"\\Deleted"])  # type: ignore[attr-defined]

        self._each(messages, lambda uid: self._base("imap-move", uid) | {"to": target},
                   act, log)

    def flag(self, messages: list[Handle], log: Log) -> None:
        keyword = self.account.options.keyword

        def act(uids: list[int]) -> None:
            self.account.client.add_flags(  # type: ignore[attr-defined]
                uids, [keyword.encode()], silent=True)

        self._each(messages, lambda uid: self._base("imap-flag", uid) | {"flag": keyword},
                   act, log)

    def delete(self, messages: list[Handle], log: Log) -> None:
        def act(uids: list[int]) -> None:
            self.account.client.add_flags(  # type: ignore[attr-defined]
                uids, [b"\\Deleted"], silent=True)

        self._each(messages, lambda uid: self._base("imap-delete", uid)
                   | {"expunged": self.account.options.expunge}, act, log)


def _expunge_uids(imap: object, uids: list[int]) -> None:
    """Expunge just these UIDs (UIDPLUS); without it, leave them marked \\Deleted rather
    than expunge whatever else the folder holds marked so."""
    if imap.has_capability("UIDPLUS"):     # type: ignore[attr-defined]
        imap.uid_expunge(uids)             # type: ignore[attr-defined]


def undo_imap(account: ImapAccount, entries: list[dict[str, object]]) -> list[str]:
    """Put back, newest first, what one run did on an IMAP account: moved messages found
    again in their target by Message-ID and content, flags and ``\\Deleted`` taken off."""
    said: list[str] = []
    client = account
    for entry in reversed(entries):
        folder = str(entry["folder"])
        uid = int(entry["uid"])             # type: ignore[call-overload]
        op = entry["op"]

        def undo_one(entry: dict[str, object] = entry, folder: str = folder, uid: int = uid,
                     op: object = op) -> str:
            if op in ("imap-flag", "imap-delete"):
                if op == "imap-delete" and entry.get("expunged"):
                    return f"CANNOT undo: UID {uid} in {folder} was expunged"
                validity = client.select(folder, readonly=False)
                if validity != entry["uidvalidity"]:
                    return f"CANNOT undo: {folder} was renumbered (UIDVALIDITY)"
                flag = str(entry.get("flag", "\\Deleted")).encode()
                client.client.remove_flags([uid], [flag])   # type: ignore[attr-defined]
                return f"took {flag.decode()} off UID {uid} in {folder}"
            target = str(entry["to"])
            imap = client.client
            # COPY and \\Deleted (a server without MOVE), not expunged: the original is
            # still there; it loses its \\Deleted, and the copy in the target goes.
            still_there = client.select(folder, readonly=False) == entry["uidvalidity"] \
                and imap.search(["UID", str(uid)])  # type: ignore[attr-defined]
            if still_there:
                imap.remove_flags([uid], [b"\\Deleted"])  # type: ignore[attr-defined]
            client.select(target, readonly=False)
            criteria = ["HEADER", "Message-ID", str(entry["message_id"])] \
                if entry.get("message_id") else ["ALL"]
            found = imap.search(criteria)  # type: ignore[attr-defined]
            bodies = imap.fetch(found, ["BODY.PEEK[]"]) if found else {}  # type: ignore[attr-defined]
            for candidate, item in sorted(bodies.items()):
                if sha256(item[b"BODY[]"]) != entry["sha256"]:
                    continue
                if still_there:
                    imap.add_flags([candidate], [b"\\Deleted"])  # type: ignore[attr-defined]
                    _expunge_uids(imap, [candidate])
                elif imap.has_capability("MOVE"):  # type: ignore[attr-defined]
                    imap.move([candidate], folder)  # type: ignore[attr-defined]
                else:
                    imap.copy([candidate], folder)  # type: ignore[attr-defined]
                    imap.add_flags([candidate], [b"\\Deleted"])  # type: ignore[attr-defined]
                    _expunge_uids(imap, [candidate])
                return f"moved back to {folder}: {entry.get('message_id') or uid}"
            if still_there:
                return f"restored in {folder}: {entry.get('message_id') or uid}"
            return f"MISSING from {target}: {entry.get('message_id') or uid}"

        said.append(str(account.retrying(undo_one)))
    return said


def open_folders(source: str, *, exclude: str | None, imap: ImapOptions | None
                 ) -> list[Folder]:
    """The folders of one SOURCE: a Maildir (and its Maildir++ sub-folders), an mbox file,
    or an IMAP URL (one folder, or the whole account when it names none)."""
    if source.startswith(("imap://", "imaps://")):
        account = ImapAccount(source, imap or ImapOptions())
        return list(account.folders(exclude))
    path = Path(source)
    if is_maildir(path):
        return list(maildir_folders(path, exclude))
    if path.is_file():
        head = path.read_bytes()[:5]
        if head and head != b"From ":
            raise SourceError(f"{source}: not an mbox (it does not start with a From line)")
        return [MboxFolder(path)]
    if path.is_dir():
        raise SourceError(f"{source}: a folder, but not a Maildir (no cur/ and new/)")
    raise SourceError(f"{source}: no such Maildir, mbox or IMAP URL")
