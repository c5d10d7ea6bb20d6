"""Messages from mailboxes on disk: mbox files, Maildirs and folders of one-message files.

Order is part of the contract of ``dupfilter-db scan``: a folder of files is read sorted by
path, an mbox in file order, a Maildir's ``cur`` then ``new`` sorted by name.
"""

from __future__ import annotations

import itertools
import mmap
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# A separator is a "From " line after a blank line that ends in a date's year (as mutt's
# is_from does), so that an unescaped "From here on" in a body does not split a message:
# a time, then four digits, then the line's end.  (The line's first time and the first
# four digits after it, each taken for good: a line has those iff it has any such pair.
# Tried with every pair, a crafted line of times cost 20 s in 128 KB, and one without a
# line break at the end of a file grew with the cube of its length.)
_MBOX_SEPARATOR = re.compile(
    rb"(?:\A|\n\n)(From (?>[^\n]*?\d\d:\d\d)(?>[^\n]*?\d{4})[^\n]*+\n)")
_MBOXRD_QUOTED = re.compile(rb"^>(>*From )", re.MULTILINE)
_HEADER_START = re.compile(rb"\A(From [^\n]*\n)?[!-9;-~]+[ \t]*:")


def looks_like_message(head: bytes) -> bool:
    """True when ``head`` (the first bytes of a file) starts like a mail message."""
    return bool(_HEADER_START.match(head))


def is_maildir(path: Path) -> bool:
    return path.is_dir() and (path / "cur").is_dir() and (path / "new").is_dir()


def _named_like_mbox(path: Path) -> bool:
    """A file starting with ``From `` is read as an mbox when named like one, or when it
    holds a second message (:func:`_holds_several`); a one-message file with a ``From ``
    line reads the same either way."""
    return path.suffix == ".mbox" or path.name == "mbox"


def _holds_several(data: bytes | mmap.mmap) -> bool:
    """True when ``data`` (starting with ``From ``) has a second message separator.

    A literal search for ``\n\nFrom `` comes first: most one-message files have none,
    and the regular expression then never runs over them.
    """
    if data.find(b"\n\nFrom ", 5) < 0:
        return False
    separators = _MBOX_SEPARATOR.finditer(data)
    return next(separators, None) is not None and next(separators, None) is not None


def _split_mbox(name: str, data: bytes | mmap.mmap) -> Iterator[tuple[str, bytes]]:
    starts = [m.start(1) for m in _MBOX_SEPARATOR.finditer(data)]
    if not starts:
        yield f"{name}:1", bytes(data)
        return
    starts.append(len(data) + 2)
    for number, (start, end) in enumerate(itertools.pairwise(starts), 1):
        message = bytes(data[start:end - 2] if end <= len(data) else data[start:])
        first_line_end = message.find(b"\n") + 1
        body = _MBOXRD_QUOTED.sub(rb"\1", message[first_line_end:])
        yield f"{name}:{number}", body


def _files_under(folder: str) -> list[str]:
    """Every non-hidden file under ``folder`` (no Maildir ``tmp``), sorted by relative path.

    Plain strings and ``os.scandir``: a corpus folder has thousands of files, and
    ``pathlib`` objects and per-file ``stat`` calls would cost more than reading them.
    """
    found: list[tuple[str, str]] = []
    folder = os.path.normpath(folder)
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        if os.path.basename(root) == "tmp" and is_maildir(Path(root).parent):
            continue
        relative_root = os.path.relpath(root, folder)
        for name in files:
            if not name.startswith("."):
                relative = name if relative_root == "." else os.path.join(relative_root, name)
                found.append((relative, os.path.join(root, name)))
    found.sort()
    return [path for _, path in found]


@dataclass(frozen=True, slots=True)
class FileRef:
    """A file whose message(s) the consumer reads itself with :func:`read_file`, so that
    worker processes, not the one that walks the folders, do the reading."""

    path: str
    explicit: bool = False      # named on the command line: read even if odd-looking


def read_file(ref: FileRef) -> tuple[list[tuple[str, bytes]], bool]:
    """The messages in one file, and whether it was skipped as not looking like mail."""
    skipped: list[str] = []
    messages = list(_file_messages(ref.path, skipped, ref.explicit))
    return messages, bool(skipped)


def iter_messages(paths: list[str], skipped: list[str] | None = None, *,
                  defer_files: bool = False) -> Iterator[tuple[str, bytes | FileRef]]:
    """(label, raw bytes) for every message under ``paths``, in scan order.

    Files that do not start like a message (a LICENSE in a corpus folder, say) are skipped
    and their names appended to ``skipped``.  With ``defer_files``, plain files (in a
    folder or named) come as ``(path, FileRef)`` instead, for :func:`read_file`.
    """
    for name in paths:
        path = Path(name)
        if name == "-":
            import sys
            yield "-", sys.stdin.buffer.read()
        elif is_maildir(path):
            for sub in ("cur", "new"):
                for file in sorted((path / sub).iterdir()):
                    if file.is_file() and not file.name.startswith("."):
                        yield str(file), file.read_bytes()
        elif path.is_dir():
            for file in _files_under(name):
                if defer_files:
                    yield file, FileRef(file)
                else:
                    yield from _file_messages(file, skipped)
        elif path.exists():
            if defer_files:
                yield name, FileRef(name, explicit=True)
            else:
                yield from _file_messages(name, skipped, explicit=True)
        else:
            raise FileNotFoundError(f"{name}: no such file or folder")


# Files up to this size are read whole (one read, no mmap); larger ones are mapped.
_READ_WHOLE = 32 * 1024 * 1024


def _file_messages(file: str, skipped: list[str] | None, explicit: bool = False
                   ) -> Iterator[tuple[str, bytes]]:
    """The message(s) in one file: read once, then told apart as an mbox or one message."""
    try:
        handle = open(file, "rb")  # noqa: SIM115 - closed below, also on the mmap path
    except IsADirectoryError:
        return
    with handle:
        size = os.fstat(handle.fileno()).st_size
        if size > _READ_WHOLE:
            if handle.read(5) == b"From ":
                with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                    if _named_like_mbox(Path(file)) or _holds_several(mapped):
                        yield from _split_mbox(file, mapped)
                        return
            handle.seek(0)
        data = handle.read()
    if data.startswith(b"From ") and (_named_like_mbox(Path(file)) or _holds_several(data)):
        yield from _split_mbox(file, data)
    elif explicit or looks_like_message(data[:4096]):
        yield file, data
    elif skipped is not None:
        skipped.append(file)
