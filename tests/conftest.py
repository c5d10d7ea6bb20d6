"""Fixtures shared by the whole suite: defaults, temporary stores, the shared corpus."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))   # helpers, support, ...

from support import corpus  # noqa: E402

from mailfilter.config import Settings, load_settings  # noqa: E402
from mailfilter.engine import Engine  # noqa: E402

# The backend fixtures (backend, store_location, store; ``every_backend`` tests) and the
# Redis servers they start.
pytest_plugins = ("support.stores", "redis_servers")


@pytest.fixture
def settings() -> Settings:
    return load_settings(search=False)


@pytest.fixture
def engine(store_location: str, settings: Settings):  # noqa: ANN201
    """An Engine on an empty store: LMDB, or each backend in an ``every_backend`` test."""
    with Engine(settings, store_location) as opened:
        yield opened


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared SpamAssassin corpus, unpacked once per test session."""
    missing = corpus.missing()
    if missing:
        pytest.fail(missing, pytrace=False)
    return corpus.unpack(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="session")
def corpus_messages(corpus_dir: Path) -> list[Path]:
    """Every message of the corpus (one file each), in a stable order."""
    files = corpus.message_files(corpus_dir)
    assert len(files) == corpus.CORPUS_MESSAGES, \
        f"expected {corpus.CORPUS_MESSAGES:,} corpus messages, found {len(files)}"
    return files


@pytest.fixture
def tiny_filesystem(tmp_path: Path):  # noqa: ANN201
    """A 4 MB tmpfs, for a store that fills its disk (tests run as root, as CI does)."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount_point)],
                   check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


# ------------------------------------------------------------------------- the host's files
# Tests never touch an installed dupfilter (docs/install.md): its command links, settings,
# store and status folder.  Compared before and after the session; a store and status
# folder that a dupfilter daemon outside this session is using are compared by their names
# only (that daemon writes to them).
HOST_PATHS = ("/usr/local/bin/dupfilter*", "/etc/dupfilter", "/var/lib/dupfilter",
              "/run/dupfilter")
LIVE_PATHS = ("/var/lib/dupfilter", "/run/dupfilter")


def host_snapshot() -> dict[str, tuple[object, ...]]:
    """Every file under :data:`HOST_PATHS`: its type, mode, owner, size, modification time
    and (for a link) target; a folder's type, mode and owner."""
    import glob
    import os
    found: dict[str, tuple[object, ...]] = {}

    def note(path: str) -> None:
        try:
            info = os.lstat(path)
        except OSError:
            return
        target = os.readlink(path) if os.path.islink(path) else ""
        if os.path.isdir(path) and not target:     # a folder: its entries, one by one
            found[path] = (info.st_mode, info.st_uid, info.st_gid)
            for entry in sorted(os.listdir(path)):
                note(os.path.join(path, entry))
        else:
            found[path] = (info.st_mode, info.st_uid, info.st_gid, info.st_size,
                           info.st_mtime_ns, target)
    for pattern in HOST_PATHS:
        for path in sorted(glob.glob(pattern)):
            note(path)
    return found


def outside_daemons() -> bool:
    """A dupfilter daemon runs that this session did not start (the host's own, or another
    session's)."""
    import os
    ours = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            if b"dupfilter-milter" not in command and b"dupfilter-smtpd" not in command:
                continue
            pid = int(entry.name)
            while pid > 1 and pid != ours:
                status = Path(f"/proc/{pid}/status").read_text()
                pid = int(status.split("PPid:", 1)[1].split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if pid != ours:
            return True
    return False


def foreign_status(path: str, session_tmp: Path) -> bool:
    """A daemon status file of another session's or a benchmark's daemon: its store is not
    under this session's temporary folder (only a status file can say whose it is)."""
    import json
    if not path.startswith("/run/dupfilter/") or not path.endswith(".json"):
        return False
    try:
        location = json.loads(Path(path).read_text())["store"]["location"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return not str(location).startswith(f"{session_tmp}/")


def host_changes(before: dict[str, tuple[object, ...]],
                 after: dict[str, tuple[object, ...]], live: bool,
                 foreign: Callable[[str], bool] = lambda path: False) -> list[str]:
    """What changed between two :func:`host_snapshot` (``live``: the store and status folder
    by names only; ``foreign``: a file some other process wrote, not counted)."""
    changes = [f"created {path}" for path in sorted(after.keys() - before.keys())
               if not foreign(path)]
    changes += [f"removed {path}" for path in sorted(before.keys() - after.keys())]
    for path in sorted(before.keys() & after.keys()):
        if before[path] != after[path] and not foreign(path) and not (
                live and path.startswith(LIVE_PATHS)):
            changes.append(f"changed {path}: {before[path]} -> {after[path]}")
    return changes


@pytest.fixture(scope="session", autouse=True)
def host_installation_untouched(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201
    """Fails the session's last test when a test changed the host's dupfilter files (not
    in tests/sandboxed_docs.py's namespace: there the docs install on overlays)."""
    import os
    if os.environ.get("DUPFILTER_DOC_SANDBOX"):
        yield
        return
    before, live = host_snapshot(), outside_daemons()
    yield
    session_tmp = tmp_path_factory.getbasetemp()
    changes = host_changes(before, host_snapshot(), live or outside_daemons(),
                           lambda path: foreign_status(path, session_tmp))
    assert not changes, "tests changed the host's dupfilter files: " + "; ".join(changes[:20])


# ------------------------------------------------------------------------- the quick tier
# `python3 -m pytest -m "not slow"` (README, "Tests") runs what a change to one module
# needs in about two minutes; `python3 -m pytest` (.ci/run) runs everything.  Slow tests are
# marked here, by file or by test, so that no test file needs its own marks: real Postfix,
# daemons started as processes, Redis servers, fuzzers, the sandboxed documentation run,
# corpus-wide measurements.
SLOW_FILES = frozenset((
    "test_milter_postfix.py", "test_smtpd_postfix.py",       # a private Postfix
    "test_milter_protocol.py", "test_smtpd.py", "test_listeners.py",  # daemons as processes
    "test_reload.py", "test_metrics.py", "test_status.py", "test_reliability.py",
    "test_reliability_daemons.py", "test_systemd.py", "test_procmail.py", "test_shutdown.py",
    "test_redis_store.py", "test_redis_cli.py", "test_store_connections.py",  # redis-server
    "test_dedupe_imap.py",                                    # a private Dovecot
    "test_quality.py", "test_histogram_golden.py", "test_precision.py",   # the corpus
    "test_config_property.py",                                # hypothesis over daemons
))
SLOW_TESTS = frozenset((
    "test_docs.py::test_system_blocks_in_a_private_namespace",   # the sandbox, ~5 min
    "test_docs.py::test_bench_commands_run_on_a_small_sample",
    "test_hostile_input.py::test_fuzzer_finds_nothing",          # atheris
    "test_hostile_input.py::test_fifty_megabyte_body_is_bounded_in_time_and_memory",
    "test_smtpd_wire.py::test_wire_fuzzer_finds_nothing",
    "test_packaging.py::test_sdist_and_wheel_build",             # builds sdist and wheel
    "test_store_damage.py::test_a_milter_on_a_damaged_store_says_why_in_status_and_log",
    "test_store_damage.py::test_verify_on_damaged_redis_values_lists_them",   # redis-server
))


# The system programs test files drive (the Redis fixtures say so for redis-server
# themselves); .ci/run installs their Debian packages.  A test whose program is missing
# fails at once with that line, instead of somewhere inside the test.
PROGRAMS: dict[str, tuple[tuple[str, str], ...]] = {
    "test_docs.py": (("procmail", "procmail"), ("maildrop", "maildrop"), ("m4", "m4"),
                     ("postconf", "postfix"), ("sievec", "dovecot-sieve")),
    "test_cli.py": (("procmail", "procmail"),),
    "test_pipe_modes.py": (("procmail", "procmail"),),
    "test_pipe_property.py": (("procmail", "procmail"),),
    "test_procmail.py": (("procmail", "procmail"),),
    "test_histogram_golden.py": (("gcc", "gcc"),),
    "test_systemd.py": (("systemd-analyze", "systemd"),),
    "test_milter_postfix.py": (("postfix", "postfix"), ("maildrop", "maildrop")),
    "test_smtpd_postfix.py": (("postfix", "postfix"),),
    "test_rspamd_peer.py": (("rspamd", "rspamd"),),
    "test_alerts.py": (("promtool", "prometheus"),),
    "test_dedupe_imap.py": (("dovecot", "dovecot-core"), ("doveadm", "dovecot-core"),
                            ("openssl", "openssl")),
}


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Fail clearly when a program the test drives is not installed."""
    missing = [(program, package) for program, package in PROGRAMS.get(item.path.name, ())
               if shutil.which(program) is None
               and not Path("/usr/sbin", program).exists()]
    if missing:
        names = ", ".join(f"{program} (Debian package {package})"
                          for program, package in missing)
        pytest.fail(f"{item.path.name} drives {names}, not installed here: `bash .ci/run` "
                    "installs every package the tests need", pytrace=False)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the slow tests (see SLOW_FILES and SLOW_TESTS)."""
    slow = pytest.mark.slow
    for item in items:
        name = item.path.name
        test = f"{name}::{item.originalname}" if hasattr(item, "originalname") else item.nodeid
        if name in SLOW_FILES or test in SLOW_TESTS:
            item.add_marker(slow)
