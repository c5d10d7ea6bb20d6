"""Build and run the reference ``chisto`` (seed 000) from the shared seed text.

The C source is never stored in this repository: it is cut out of
``shared/seeds/000_fd904c77b16acfe3.txt`` at run time, written to a temporary
directory and compiled there.  The 1999 K&R code compiles on gcc 12 with
``-std=gnu89`` plus forced ``#include``s for the prototypes it omits.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from support.corpus import SHARED

SEED_PATH = SHARED / "seeds" / "000_fd904c77b16acfe3.txt"

HISTOGRAM_SIZE = 36
BEGIN_MARKER = "#ifndef lint"
END_MARKER = "#endif  /* TEST_CHISTO */"
COMPILER = "gcc"
# -O0 keeps chisto's `(char)((double)work[k] * factor)` a plain SSE2 truncation, as written.
CFLAGS: tuple[str, ...] = (
    "-DTEST_CHISTO", "-std=gnu89", "-O0", "-w",
    "-include", "stdlib.h", "-include", "string.h", "-include", "unistd.h",
)


class ChistoUnavailable(RuntimeError):
    """The reference chisto cannot be built (no seed text, no gcc, or a compile error)."""


def extract_source(seed_text: str) -> str:
    """The C code of the seed: from the ``#ifndef lint`` line to the last ``TEST_CHISTO`` endif."""
    lines = seed_text.splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith(BEGIN_MARKER)]
    ends = [i for i, line in enumerate(lines) if line.startswith(END_MARKER)]
    if not starts or not ends or ends[-1] < starts[0]:
        raise ChistoUnavailable(
            f"seed text has no C code between {BEGIN_MARKER!r} and {END_MARKER!r}")
    return "".join(lines[starts[0]:ends[-1] + 1])


def compiler_version(compiler: str = COMPILER) -> str:
    """First line of ``<compiler> --version`` (for the record in the vector file)."""
    result = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=True)
    return result.stdout.splitlines()[0].strip()


def build_chisto(workdir: Path, seed_path: Path = SEED_PATH, compiler: str = COMPILER) -> Path:
    """Compile chisto from ``seed_path`` inside ``workdir``; return the binary's path."""
    if not seed_path.is_file():
        raise ChistoUnavailable(
            f"seed {seed_path} not found: the shared/ folder must sit beside the checkout")
    if shutil.which(compiler) is None:
        raise ChistoUnavailable(
            f"{compiler!r} not found on PATH: install gcc to build the reference chisto")
    workdir.mkdir(parents=True, exist_ok=True)
    source = workdir / "chisto.c"
    binary = workdir / "chisto"
    source.write_text(extract_source(seed_path.read_text(encoding="utf-8")), encoding="utf-8")
    result = subprocess.run([compiler, *CFLAGS, "-o", str(binary), str(source)],
                            capture_output=True, text=True)
    if result.returncode != 0 or not binary.is_file():
        raise ChistoUnavailable(
            f"compiling chisto failed ({compiler} {' '.join(CFLAGS)}):\n{result.stderr}")
    return binary


def run_chisto(binary: Path, raw: bytes) -> bytes:
    """chisto's default mode: ``raw`` on stdin, the 36-byte histogram from stdout.

    Input containing NUL is refused: chisto's ``strchr(alphabet, c)`` matches the string's
    terminator for ``c == 0`` and increments ``work[36]``, one past the array (undefined
    behaviour), so its output for such input means nothing.
    """
    if b"\x00" in raw:
        raise ValueError("chisto's behaviour on NUL bytes is undefined (work[36] overflow)")
    result = subprocess.run([str(binary)], input=raw, capture_output=True, timeout=60)
    if result.returncode != 0 or len(result.stdout) != HISTOGRAM_SIZE:
        raise RuntimeError(
            f"chisto exited {result.returncode} with {len(result.stdout)} bytes of output: "
            f"{result.stderr.decode('utf-8', 'replace')}")
    return result.stdout
