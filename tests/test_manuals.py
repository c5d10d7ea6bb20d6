"""Manual pages and completion are generated from the parsers that make --help
(mailfilter/cli/manuals.py): the committed files are what the generator makes now, man
renders each page, bash reads the completion, and the units' Documentation= pages exist."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from mailfilter.cli import manuals

REPO = Path(__file__).resolve().parents[1]
MAN = REPO / "mailfilter" / "data" / "man"


def test_generated_files_are_up_to_date() -> None:
    stale = [str(path) for path, text in manuals.generated().items()
             if not path.exists() or path.read_text(encoding="utf-8") != text]
    assert not stale, f"run python3 -m mailfilter.cli.manuals: {stale}"


def test_every_option_of_every_command_is_in_its_page() -> None:
    for name, parser in manuals.parsers().items():
        page = (MAN / "man1" / f"{name}.1").read_text()
        for action in parser._actions:
            for flag in action.option_strings:
                assert flag.replace("-", "\\-") in page, (name, flag)


@pytest.mark.parametrize("page", sorted(p.relative_to(MAN).as_posix()
                                         for p in MAN.glob("man*/*")))
def test_man_renders_the_page_without_warnings(page: str) -> None:
    if not shutil.which("man"):
        pytest.skip("man is not installed")
    done = subprocess.run(["man", "--warnings", "-l", "-P", "cat", str(MAN / page)],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "MANWIDTH": "80"})
    assert done.returncode == 0 and "NAME" in done.stdout, done.stderr
    assert not done.stderr.strip(), done.stderr


def test_units_document_pages_that_exist() -> None:
    for unit in (REPO / "systemd").iterdir():
        for found in re.findall(r"man:([\w.-]+)\((\d)\)", unit.read_text()):
            name, section = found
            assert (MAN / f"man{section}" / f"{name}.{section}").is_file(), (unit.name, found)


def test_bash_completion_completes_commands_and_options() -> None:
    script = (REPO / "mailfilter" / "data" / "completion" / "dupfilter.bash")
    probe = f"""
_init_completion() {{ cur=${{COMP_WORDS[COMP_CWORD]}}; prev=${{COMP_WORDS[COMP_CWORD-1]}};
  words=("${{COMP_WORDS[@]}}"); cword=$COMP_CWORD; }}
_filedir() {{ COMPREPLY=(FILE); }}
source {script}
COMP_WORDS=(dupfilter-db st); COMP_CWORD=1; _dupfilter_db; echo "${{COMPREPLY[*]}}"
COMP_WORDS=(dupfilter-db stats --d); COMP_CWORD=2; _dupfilter_db; echo "${{COMPREPLY[*]}}"
COMP_WORDS=(dupfilter --c); COMP_CWORD=1; _dupfilter; echo "${{COMPREPLY[*]}}"
"""
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    commands, stats, pipe = done.stdout.splitlines()
    assert set(commands.split()) == {"stats", "status"}
    assert set(stats.split()) == {"--db", "--days"}
    assert set(pipe.split()) == {"--config", "--check"}
