"""The documentation runs as written: README's main command, the procmail recipes of
README.md and docs/procmail.md (taken from the files themselves), operations commands."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from helpers import make_message, paragraph_text

REPO = Path(__file__).resolve().parents[1]
DUPFILTER = shutil.which("dupfilter") or "dupfilter"


def code_blocks(path: Path, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", path.read_text(), re.DOTALL)


def run(command: str, tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, shell=True, cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "XDG_STATE_HOME": str(tmp_path),
                                            "DUPFILTER_CONFIG": "", **env})


def test_readme_main_command(tmp_path: Path) -> None:
    setup = code_blocks(REPO / "README.md", "sh")[0].strip()
    install, _, main_job = setup.partition(" && ")
    assert install.startswith("python3 -m pip install")   # CI has installed the package
    result = run(main_job, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "7 messages: 3 unique, 2 duplicate, 2 near-duplicate" in result.stdout
    assert (tmp_path / "dupfilter" / "data.mdb").exists()     # the per-user default store


def test_readme_test_command_is_what_ci_runs() -> None:
    readme_command = code_blocks(REPO / "README.md", "sh")[1].strip()
    assert readme_command == "bash .ci/run"
    assert (REPO / ".ci" / "run").read_text().rstrip().endswith("python3 -m pytest")


def deliver_with(recipe: str, tmp_path: Path, messages: list[bytes]) -> dict[str, int]:
    mail = tmp_path / "mail"
    mail.mkdir(parents=True, exist_ok=True)
    rcfile = tmp_path / "rc"
    rcfile.write_text(f"SHELL=/bin/sh\nPATH={Path(DUPFILTER).parent}:/usr/bin:/bin\n"
                      f"XDG_STATE_HOME={tmp_path}/state\nMAILDIR={mail}\n"
                      f"DEFAULT=$MAILDIR/inbox/\nLOGFILE={tmp_path}/log\n{recipe}")
    for raw in messages:
        result = subprocess.run(["procmail", "-m", str(rcfile)], input=raw,
                                capture_output=True, timeout=60)
        assert result.returncode == 0, (tmp_path / "log").read_text()
    return {folder.name: len(list((folder / "new").iterdir()))
            for folder in mail.iterdir() if (folder / "new").is_dir()}


def test_every_documented_procmail_recipe_files_the_copy_apart(tmp_path: Path) -> None:
    recipes = code_blocks(REPO / "README.md", "procmail") + \
        code_blocks(REPO / "docs" / "procmail.md", "procmail")
    assert len(recipes) >= 4
    text = paragraph_text(77, count=200)
    messages = [make_message(text, message_id="<doc1@example.org>"),
                make_message(text, message_id="<doc2@example.org>")]
    for number, recipe in enumerate(recipes):
        counts = deliver_with(recipe, tmp_path / f"recipe{number}", messages)
        assert counts == {"inbox": 1, "duplicates": 1}, (recipe, counts)


def test_operations_backup_with_mdb_copy_and_config_check(tmp_path: Path) -> None:
    store = tmp_path / "store"
    subprocess.run([DUPFILTER, "--db", str(store), "--tag"], input=make_message("hello there"),
                   capture_output=True, check=True)
    operations = (REPO / "docs" / "operations.md").read_text()
    assert "mdb_copy -c /var/lib/dupfilter /backup/dupfilter" in operations
    backup = tmp_path / "backup"
    backup.mkdir()
    subprocess.run(["mdb_copy", "-c", str(store), str(backup)], check=True)
    stats = run(f"dupfilter-db --db {backup} stats --json", tmp_path)
    assert '"records": 1' in stats.stdout
    assert "config --check" in operations
    checked = run("dupfilter-db --config config/dupfilter.toml config --check", tmp_path)
    assert checked.returncode == 0 and "configuration is valid" in checked.stdout
