"""The daemons' life cycle (``dupfilter-milter``, ``dupfilter-smtpd``): nothing here knows
a mail protocol.

The shared engine, opened lazily when the store cannot be opened at start; the common
command-line flags and settings; SIGHUP's reload; shutdown signals; systemd's readiness
notification; refusing root or dropping to an unprivileged user (and checking that it can
read the Python installation); the status file that ``dupfilter-db status`` reads.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import sys
import sysconfig
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

from mailfilter import __version__
from mailfilter.aliases import load_aliases
from mailfilter.config import ConfigError, Settings, load_settings, masked
from mailfilter.store import StoreError

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mailfilter.decision import Disposition
    from mailfilter.detector import Verdict
    from mailfilter.engine import Analysis, Decision, Engine
    from mailfilter.logs import Outcome
    from mailfilter.recorder import Coming



class DaemonError(RuntimeError):
    """A start-up problem worded for the postmaster (exit status 2, no traceback)."""


# ------------------------------------------------------------------------ the engine

# How often a daemon tries again to open a store it could not open (--store-retry).
STORE_RETRY_SECONDS = 10.0
# How long a message waits for the writer to check and record it before on_error applies.
PROCESS_SECONDS = 30.0


class LazyEngine:
    """A daemon's shared engine: opened at start-up when the store can be, and otherwise
    tried again every ``retry_seconds`` by a timer (and when a message needs it, at most
    that often), so that a store fixed meanwhile is open again, and status says so, before
    the next message comes.

    Until then :meth:`get` is None and each message gets the front end's ``on_error``: a
    store that cannot be opened (a missing folder, wrong permissions, Redis down at boot)
    is one clear log line and a running daemon, not a crash loop under systemd.
    """

    def __init__(self, settings: Settings, logger: logging.Logger, section: str, *,
                 retry_seconds: float = STORE_RETRY_SECONDS, engine: Engine | None = None
                 ) -> None:
        self.settings = settings
        self.logger = logger
        self.section = section          # "milter" or "smtpd": whose on_error the log names
        self.retry_seconds = retry_seconds
        self._engine = engine
        self._lock = threading.Lock()
        self._next_attempt = 0.0
        self._closed = False            # closed at shutdown: never opened again
        self._timer: threading.Timer | None = None
        self.status: DaemonStatus | None = None      # told when the store opens or fails

    def get(self) -> Engine | None:
        """The engine, opening it (again) when it is missing and it is time to try."""
        engine = self._engine
        if engine is not None:
            return engine
        with self._lock:
            if self._engine is None and not self._closed \
                    and time.monotonic() >= self._next_attempt:
                self.open()
            return self._engine

    def open(self) -> bool:
        """Try to open the store; log clearly when it cannot be opened."""
        location = self.settings.store.location()
        try:
            from mailfilter.engine import Engine
            from mailfilter.fingerprint import use_numpy
            use_numpy()     # a daemon checks many messages: long ones are hashed with it
            self._engine = Engine(self.settings)
        except Exception as error:  # any failure means "no store yet"
            self._next_attempt = time.monotonic() + self.retry_seconds
            self._retry_later()
            if self.status is not None:
                self.status.store_failed(location, error)
            sd_notify(f"STATUS=store not open ({masked(str(error))}); messages get "
                      f"on_error={getattr(self.settings, self.section).on_error}")
            self.logger.error(
                "cannot open the store at %s: %s; messages get on_error=%s until it opens "
                "(retrying every %gs)", location, error,
                getattr(self.settings, self.section).on_error, self.retry_seconds)
            return False
        self.logger.info("store opened: %s", location)
        if self.status is not None:
            self.status.store_opened(location)
        return True

    def _retry_later(self) -> None:
        """Try to open the store again in ``retry_seconds`` (one timer at a time)."""
        if self._closed or (self._timer is not None and self._timer.is_alive()
                            and self._timer is not threading.current_thread()):
            return
        self._timer = threading.Timer(self.retry_seconds, self._retry)
        self._timer.name = "dupfilter-store-retry"
        self._timer.daemon = True
        self._timer.start()

    def _retry(self) -> None:
        with self._lock:
            if self._engine is None and not self._closed:
                self.open()

    @property
    def is_open(self) -> bool:
        """True while the store is open (no attempt to open it: for gauges and status)."""
        return self._engine is not None

    def count_decision(self, outcome: Outcome) -> None:
        """Count a message's decision in the store (``dupfilter-db stats``), on the
        engine's writer thread with the records; nothing while the store is not open."""
        engine = self._engine
        if engine is None or outcome.counted:
            return
        decision, when = outcome.decision, int(time.time())
        try:
            engine.recorder.submit(lambda: engine.store.count_decision(decision, when))
        except StoreError:          # closed meanwhile (shutdown): that count is not kept
            pass

    def records(self) -> float:
        """Records in the store, for the metrics gauge (NaN while the store is down)."""
        engine = self.get()
        try:
            return float(engine.store.stats()["records"]) if engine else float("nan")
        except Exception:  # noqa: BLE001 - a scrape must not fail
            return float("nan")

    def close(self) -> None:
        """Commit what is queued and close the store, for good (a message that still
        asks for the engine gets None: on_error)."""
        with self._lock:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
            if self._engine is not None:
                self._engine.close()
                self._engine = None


# ------------------------------------------------------------------ command line, settings

def daemon_parser(program: str, description: str) -> argparse.ArgumentParser:
    """A daemon's command line with the flags every daemon shares: --config, --db, --user,
    --allow-root, --store-retry, --version."""
    parser = argparse.ArgumentParser(prog=program, description=description)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--config", metavar="FILE",
                        help="TOML settings (default: $DUPFILTER_CONFIG, the user's, then "
                             "/etc/dupfilter/dupfilter.toml; none: built-in defaults)")
    parser.add_argument("--db", metavar="DIR",
                        help="store location: an LMDB folder or a redis:// URL "
                             "(overrides store.path)")
    parser.add_argument("--user", metavar="NAME",
                        help="when started as root, switch to this user (and its groups) "
                             "after opening the listening socket")
    parser.add_argument("--allow-root", action="store_true",
                        help="run as root (refused otherwise)")
    parser.add_argument("--store-retry", metavar="SECONDS", type=float,
                        default=STORE_RETRY_SECONDS,
                        help="when the store cannot be opened, try again this often "
                             "(default %(default)g; meanwhile messages get on_error)")
    parser.add_argument("--status-dir", metavar="DIR", default=default_status_dir(),
                        help="keep the status that `dupfilter-db status` reads in "
                             "DIR/PROGRAM.json (default: $RUNTIME_DIRECTORY under systemd, "
                             f"else {STATUS_DIR}; \"\" for none)")
    parser.add_argument("--instance", metavar="NAME",
                        help="this daemon's name in `dupfilter-db status` when several of "
                             "one kind run (postmulti): its status is DIR/PROGRAM@NAME.json "
                             "(default: the systemd unit's instance, or its name when that "
                             "is not PROGRAM)")
    return parser


def load_daemon_settings(args: argparse.Namespace) -> Settings:
    """Settings from ``--config`` (or the search order) with ``--db`` applied, and the
    files they name read once (a broken aliases file refuses the start, as a bad key
    does, rather than leaving every message unchecked)."""
    settings = load_settings(getattr(args, "config", None))
    db = getattr(args, "db", None)
    if db:
        settings.store.path = db
    load_aliases(settings.detector.aliases)
    return settings


# Sections a running daemon cannot take over on SIGHUP: the store stays open, and
# fingerprints, detector and rules must stay those the store's records were made with.
_RESTART_SECTIONS = ("store", "fingerprint", "detector", "policy", "metrics")


def reload_settings(running: Settings, load: Callable[[], Settings], section: str,
                    restart_keys: Iterable[str], logger: logging.Logger,
                    status: DaemonStatus | None = None) -> bool:
    """SIGHUP in either daemon: apply a fresh copy of the front end's own section.

    ``load`` reads the file again (with the command line's overrides).  A file that does
    not load keeps the running settings and says why.  Keys in ``restart_keys`` (the
    socket, say) and the other sections are only compared: a change is logged as taking
    effect after a restart.  The log level changes at once.  Connections in progress are
    not touched; each new message reads the section afresh.  True if applied.
    """
    sd_notify("RELOADING=1")
    try:
        try:
            fresh = load()
        except (ConfigError, DaemonError, OSError) as error:
            logger.error("SIGHUP: configuration not reloaded, keeping the running one: %s",
                         error)
            if status is not None:
                status.config_failed(error)
            return False
        if status is not None:
            status.config_loaded()
        current, wanted = getattr(running, section), getattr(fresh, section)
        restart = set(restart_keys)
        for name in current.__dataclass_fields__:
            value = getattr(wanted, name)
            if name not in restart:
                setattr(current, name, value)
            elif value != getattr(current, name):
                logger.warning("SIGHUP: %s.%s changed; it takes effect after a restart",
                               section, name)
        for other in _RESTART_SECTIONS:
            if getattr(fresh, other) != getattr(running, other):
                logger.warning("SIGHUP: [%s] changed; it takes effect after a restart", other)
        if fresh.log.target != running.log.target:
            logger.warning("SIGHUP: log.target changed; it takes effect after a restart")
        running.log.level = fresh.log.level
        level = logging.getLevelName(fresh.log.level.upper())
        logger.setLevel(level if isinstance(level, int) else logging.INFO)
        actions = current.actions
        logger.info("configuration reloaded from %s (unique=%s duplicate=%s "
                    "near-duplicate=%s on_error=%s)", fresh.source or "defaults",
                    actions.unique, actions.duplicate, actions.near_duplicate,
                    current.on_error)
        return True
    finally:
        sd_notify("READY=1")


def exit_on_config_error(program: str, error: ConfigError | DaemonError) -> int:
    """Print a start-up error the way every daemon does; returns the exit status (2)."""
    print(f"{program}: {error}", file=sys.stderr)
    return 2


# --------------------------------------------------------------------------- signals

def install_shutdown_handler(callback: Callable[[int], None],
                             signals: Iterable[int] = (signal.SIGTERM, signal.SIGINT)
                             ) -> None:
    """Call ``callback(signum)`` on SIGTERM/SIGINT (main thread only).

    The callback runs in the main thread between bytecodes: it should only set flags or
    ask a server loop to stop, never block.
    """
    def handler(signum: int, frame: FrameType | None) -> None:
        callback(signum)

    for signum in signals:
        signal.signal(signum, handler)


def sd_notify(*states: str) -> bool:
    """Tell systemd (``Type=notify``) about the service: ``READY=1``, ``RELOADING=1``,
    ``STOPPING=1``, ``STATUS=...``.  A no-op (False) when not started by systemd."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address or not states:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]          # abstract namespace
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall("\n".join(states).encode("utf-8"))
    except OSError:
        return False
    return True


# -------------------------------------------------------------------------- privileges

def check_privileges(user: str | None, allow_root: bool,
                     logger: logging.Logger | None = None) -> None:
    """Refuse root unless allowed; as root with ``user``, become that user for good.

    Call it after the privileged set-up (binding a socket, opening files that root owns).
    Raises :class:`DaemonError` with a message for the postmaster.
    """
    euid = os.geteuid()
    if user:
        import grp
        import pwd
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            raise DaemonError(f"--user {user}: no such user") from None
        if euid == entry.pw_uid:
            return
        if euid != 0:
            raise DaemonError(f"--user {user}: only root can switch users "
                              f"(running as uid {euid})")
        groups = [g.gr_gid for g in grp.getgrall() if user in g.gr_mem]
        needed = installation_paths()       # found as root: sysconfig itself imports lazily
        os.setgroups(sorted({entry.pw_gid, *groups}))
        os.setgid(entry.pw_gid)
        os.setuid(entry.pw_uid)
        os.environ["HOME"] = entry.pw_dir
        os.environ["USER"] = os.environ["LOGNAME"] = entry.pw_name
        if os.geteuid() == 0 or os.getuid() == 0:
            raise DaemonError(f"--user {user}: could not drop root privileges")
        check_installation_readable(f"--user {user}", needed)
        if logger is not None:
            logger.info("running as user %s (uid %d, gid %d)", user, entry.pw_uid,
                        entry.pw_gid)
        return
    if euid == 0 and not allow_root:
        raise DaemonError("refusing to run as root: pass --user NAME to switch to an "
                          "unprivileged user, or --allow-root")


def set_socket_permissions(path: str, mode: str | int, group: str | None,
                           logger: logging.Logger | None = None) -> None:
    """chmod (and chgrp, when the group exists) a unix socket or file; never raises.

    A missing group is logged and skipped: the mode alone may already be enough.
    """
    try:
        os.chmod(path, int(mode, 8) if isinstance(mode, str) else mode)
    except (OSError, ValueError) as error:
        if logger is not None:
            logger.warning("cannot set mode %s on %s: %s", mode, path, error)
    if not group:
        return
    import grp
    try:
        gid = grp.getgrnam(group).gr_gid
    except KeyError:
        if logger is not None:
            logger.warning("socket group %r does not exist; %s keeps its group", group, path)
        return
    try:
        if os.stat(path).st_gid != gid:      # no chown(2) when there is nothing to change
            os.chown(path, -1, gid)
    except OSError as error:
        if logger is not None:
            logger.warning("cannot give %s to group %s: %s", path, group, error.strerror)


def installation_paths() -> list[tuple[str, str]]:
    """(path, what) a daemon needs to read after giving up root: the interpreter, the
    standard library (a lazy ``import json`` or a charset's codec), the compiled modules,
    dupfilter and the packages it imports."""
    import importlib.util
    paths = [(os.path.realpath(sys.executable), "the Python interpreter"),
             (sysconfig.get_path("stdlib"), "the Python standard library"),
             (os.path.join(sysconfig.get_path("stdlib"), "json", "__init__.py"),
              "the standard library's json package"),
             (os.path.join(sysconfig.get_path("stdlib"), "encodings", "koi8_r.py"),
              "the standard library's codecs")]
    dynload = os.path.join(sysconfig.get_path("platstdlib"), "lib-dynload")
    if os.path.isdir(dynload):
        paths.append((dynload, "the standard library's compiled modules"))
    for module in ("mailfilter", "numpy", "lmdb", "xxhash", "selectolax"):
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.origin:
            paths.append((spec.origin, f"the {module} package"))
    return paths


def check_installation_readable(who: str, paths: list[tuple[str, str]] | None = None
                                ) -> None:
    """After dropping privileges: refuse to go on (DaemonError, exit 2) when this user
    cannot read the interpreter, the standard library or dupfilter's packages, instead of
    failing later at the first lazy import (``No module named 'json'``)."""
    for path, what in installation_paths() if paths is None else paths:
        wanted = os.R_OK | (os.X_OK if os.path.isdir(path) or path == sys.executable else 0)
        if not os.access(path, wanted):
            blocked = next((parent for parent in reversed(Path(path).parents)
                            if not os.access(parent, os.X_OK)), None)
            where = f" (no search permission on {blocked})" if blocked else ""
            raise DaemonError(
                f"{who} cannot read {path}, {what}{where}: the daemon would fail at its "
                "next import (\"No module named ...\").  Install dupfilter where that user "
                "can read it, e.g. a virtual environment in /opt/dupfilter on the system's "
                "python3 (docs/install.md); a Python under /root (pyenv) is not readable")


# ----------------------------------------------------------------- the installed units

# Where systemd finds units, in its order (a unit in /etc wins over the package's).
SYSTEMD_UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system",
                     "/usr/local/lib/systemd/system", "/lib/systemd/system",
                     "/usr/lib/systemd/system")
DAEMON_UNITS = ("dupfilter-milter.service", "dupfilter-smtpd.service")


def process_message(engine: Engine, analysis: Analysis, recipients: Sequence[str],
                    planned: Callable[[Verdict], Disposition], *, sender: str | None,
                    group_commit: bool = True, coming: Coming | None = None
                    ) -> tuple[Decision[Disposition], bool]:
    """Check, plan and record one message for a daemon: with group commit (committed with
    whatever else is queued, by this thread or another: ``Engine.process_grouped``), or
    in this thread's own transaction when group commit is not used or its queue is full;
    recording that fails (a full disk) still checks (``coming``: ``Engine.expect``'s, taken
    before the analysis).  Also whether its decision is
    already counted in the store (``Outcome.counted``): with group commit it is, in the
    message's own transaction (a commit of its own for the count cost about
    a fifth of the milter's CPU for a small message, and a second wait for the disk; a
    count that fails is lost, never the message's record)."""
    from mailfilter.logs import decision_of

    def count(decision: Decision[Disposition]) -> None:
        try:
            engine.store.count_decision(decision_of(decision.plan.action, decision.verdict),
                                        int(time.time()))
        except StoreError:
            pass
    decided = None
    if group_commit:
        try:
            decided = engine.process_grouped(analysis, recipients, planned, sender=sender,
                                             then=count, timeout=PROCESS_SECONDS,
                                             coming=coming)
        except StoreError as error:     # recording failed (disk full): checked all the same
            return engine.process_unrecorded(analysis, recipients, planned, error,
                                             sender=sender), False
    if decided is None:
        return engine.process(analysis, recipients, planned, sender=sender), False
    return decided, True


@dataclass(frozen=True)
class InstalledUnit:
    """What an installed unit runs its daemon with: ``ExecStart``'s ``--flag value`` pairs
    (drop-ins applied) and ``User=``."""

    name: str
    path: str
    flags: dict[str, str]
    user: str | None


def installed_unit(name: str, folders: Iterable[str] | None = None) -> InstalledUnit | None:
    """The unit ``name`` as systemd would read it from ``folders`` (default
    SYSTEMD_UNIT_DIRS): the first file of that name, then its drop-ins (``NAME.d/*.conf``,
    in name order; an empty ``ExecStart=`` resets it).  None when it is not installed."""
    import shlex
    folders = list(SYSTEMD_UNIT_DIRS if folders is None else folders)
    main = next((Path(f) / name for f in folders if (Path(f) / name).is_file()), None)
    if main is None:
        return None
    drop_ins = sorted((p for f in folders for p in (Path(f) / f"{name}.d").glob("*.conf")),
                      key=lambda p: p.name)
    command, user = "", None
    for path in (main, *drop_ins):
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        for line in lines:
            key, _, value = line.strip().partition("=")
            if key == "ExecStart":
                command = value.strip().lstrip("@-:+!")
            elif key == "User":
                user = value.strip() or None
    try:
        words = shlex.split(command)
    except ValueError:
        words = []
    flags: dict[str, str] = {}
    for index, word in enumerate(words):
        if not word.startswith("--"):
            continue
        flag, equals, value = word.partition("=")
        if equals:
            flags[flag] = value
        elif index + 1 < len(words) and not words[index + 1].startswith("--"):
            flags[flag] = words[index + 1]
    return InstalledUnit(name, str(main), flags, user)


def system_daemon_settings(settings: Settings, folders: Iterable[str] | None = None
                           ) -> list[str]:
    """``settings`` as the installed daemons really run with them, for ``dupfilter-db``
    run as root or as the units' user on the units' own settings file: the store the units
    pass with ``--db``, the milter's ``--socket``, the SMTP filter's ``--listen`` and
    ``--next-hop``, each where the file leaves it at its default.  Returns what was taken
    (``store.path from dupfilter-milter.service --db``).  Nothing on a host without the
    units, or for another user or settings file (a user's own store stays theirs)."""
    folders = list(SYSTEMD_UNIT_DIRS if folders is None else folders)
    taken: list[str] = []
    try:
        import pwd
        me = pwd.getpwuid(os.geteuid()).pw_name
    except (KeyError, ImportError):
        me = ""
    wanted = {"dupfilter-milter.service": (("--db", "store.path"),
                                           ("--socket", "milter.socket")),
              "dupfilter-smtpd.service": (("--db", "store.path"), ("--listen", "smtpd.listen"),
                                          ("--next-hop", "smtpd.next_hop"))}
    for name in DAEMON_UNITS:
        unit = installed_unit(name, folders)
        if unit is None or not (os.geteuid() == 0 or me == unit.user):
            continue
        config = unit.flags.get("--config")
        if config is None or settings.source is None or \
                os.path.realpath(config) != os.path.realpath(settings.source):
            continue
        for flag, key in wanted[name]:
            section, _, field_name = key.partition(".")
            if flag not in unit.flags or settings.origin(key) != "default" or \
                    any(key in line for line in taken):
                continue
            setattr(getattr(settings, section), field_name, unit.flags[flag])
            origins = getattr(settings, "origins", None)
            if isinstance(origins, dict):
                origins[key] = f"{unit.path} {flag}"
            taken.append(f"{key} = {unit.flags[flag]} (from {name} {flag})")
    return taken


# ------------------------------------------------------------------------------ status

STATUS_DIR = "/run/dupfilter"
# The status file is rewritten at least this often (its "updated" time is a heartbeat)...
HEARTBEAT_SECONDS = 5.0
# ... and a status older than this means the daemon is hung or gone.
STALE_SECONDS = 30.0
# "Recently", for status: errors, unchecked messages and recording failures are also
# counted over this many seconds (in one-minute buckets), and judged on those counts.
RECENT_SECONDS = 300
_BUCKET_SECONDS = 60
# Exit codes of `dupfilter-db status`: the monitoring-plugin convention (Nagios, Icinga).
OK, WARNING, CRITICAL, UNKNOWN = 0, 1, 2, 3
SEVERITY_NAMES = {OK: "OK", WARNING: "WARNING", CRITICAL: "CRITICAL", UNKNOWN: "UNKNOWN"}


def default_status_dir() -> str:
    """systemd's RuntimeDirectory= (``$RUNTIME_DIRECTORY``), else /run/dupfilter."""
    runtime = os.environ.get("RUNTIME_DIRECTORY", "")
    return runtime.split(":")[0] if runtime else STATUS_DIR


def systemd_unit(cgroup: str = "/proc/self/cgroup") -> str | None:
    """The systemd service this process runs in (``dupfilter-milter@b.service``), from
    its cgroup; None outside one."""
    try:
        text = Path(cgroup).read_text(encoding="utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        for part in reversed(line.rpartition(":")[2].split("/")):
            if part.endswith(".service"):
                return part
    return None


def instance_name(program: str, explicit: str | None, unit: str | None = None) -> str | None:
    """The name that tells this daemon from others of its kind in ``dupfilter-db status``:
    ``--instance``, else the systemd unit's instance (``dupfilter-milter@b.service``: b) or
    its name when that is not the program's (``dupfilter-milter-b.service``); None for the
    one daemon of its kind, and outside a dupfilter unit."""
    if explicit:
        return explicit
    unit = systemd_unit() if unit is None else unit
    if not unit or not unit.startswith("dupfilter"):    # started by hand, or by another
        return None                                      # service (a CI runner, say)
    stem = unit.removesuffix(".service")
    _base, at, instance = stem.partition("@")
    if at and instance:
        return instance
    return None if stem == program else stem


def status_file_name(program: str, instance: str | None) -> str:
    """``PROGRAM.json``, or ``PROGRAM@INSTANCE.json`` (unsafe characters as ``_``)."""
    if not instance:
        return f"{program}.json"
    safe = "".join(c if c.isalnum() or c in "-_.:" else "_" for c in instance)
    return f"{program}@{safe}.json"


class _Recent:
    """Counts over the last ``RECENT_SECONDS``, in one-minute buckets."""

    NAMES = ("messages", "unchecked", "errors", "recorded", "record_failures")

    def __init__(self) -> None:
        self._buckets: dict[int, dict[str, int]] = {}

    def add(self, name: str, now: float) -> None:
        minute = int(now // _BUCKET_SECONDS)
        bucket = self._buckets.setdefault(minute, dict.fromkeys(self.NAMES, 0))
        bucket[name] += 1

    def totals(self, now: float) -> dict[str, int]:
        first = int((now - RECENT_SECONDS) // _BUCKET_SECONDS) + 1
        for minute in [m for m in self._buckets if m < first]:
            del self._buckets[minute]
        totals = dict.fromkeys(self.NAMES, 0)
        for bucket in self._buckets.values():
            for name, count in bucket.items():
                totals[name] += count
        return totals


class DaemonStatus:
    """A daemon's state as ``dupfilter-db status`` shows it, kept in ``DIR/PROGRAM.json``
    (``PROGRAM@INSTANCE.json`` for a named instance; written whole and renamed into place,
    at least every ``HEARTBEAT_SECONDS``): version, up since, the store (open or not, and
    how its last operations went), messages, verdicts and decisions since start, errors,
    unchecked messages and recording failures since start and in the last
    ``RECENT_SECONDS``, a configuration that did not load, a clean stop.  A folder that
    cannot be written is said once, and the daemon runs on.
    """

    def __init__(self, program: str, folder: str | None, logger: logging.Logger, *,
                 listening: str, store: str, on_error: str,
                 heartbeat: float = HEARTBEAT_SECONDS, instance: str | None = None) -> None:
        self.logger = logger
        self.heartbeat = heartbeat
        self.program = program
        self.instance = instance
        self.path = self._claim(Path(folder), program, instance) if folder else None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failed = False
        self._dirty = False
        self._recent = _Recent()
        now = time.time()
        try:
            import pwd
            user = pwd.getpwuid(os.geteuid()).pw_name
        except (KeyError, ImportError):
            user = str(os.geteuid())
        self.data: dict[str, Any] = {
            "program": program, "instance": self.instance, "version": __version__,
            "pid": os.getpid(), "user": user,
            "state": "starting", "started": now, "updated": now, "listening": listening,
            "heartbeat_seconds": heartbeat, "on_error": on_error,
            "store": {"location": masked(store), "open": False, "since": None,
                      "error": None, "last_ok": None, "last_failure": None},
            "messages": 0, "verdicts": {}, "decisions": {}, "errors": 0, "last_error": None,
            "unchecked": 0, "record_failures": 0, "last_record_failure": None,
            "recent": {"seconds": RECENT_SECONDS, **dict.fromkeys(_Recent.NAMES, 0)},
            "config_error": None, "stopped": None,
        }

    def _claim(self, folder: Path, program: str, instance: str | None) -> Path:
        """The status file: ``PROGRAM[@INSTANCE].json``, unless another daemon that is
        running keeps that one (two of a kind without ``--instance``): then one named after
        this process, said in the log, so that neither hides the other."""
        path = folder / status_file_name(program, instance)
        try:
            other = json.loads(path.read_text(encoding="utf-8"))
            pid = int(other.get("pid", 0))
            taken = other.get("state") != "stopped" and pid not in (0, os.getpid()) \
                and _process_exists(pid)
        except (OSError, ValueError, TypeError, AttributeError):
            taken = False
        if not taken:
            return path
        self.instance = f"pid{os.getpid()}"
        mine = folder / status_file_name(program, self.instance)
        self.logger.warning("another %s (pid %d) keeps its status in %s: this one keeps "
                            "its own in %s (give each an --instance NAME)", program, pid,
                            path, mine)
        return mine

    # -- what happens -----------------------------------------------------------------

    def store_opened(self, location: str) -> None:
        with self._lock:
            store = self.data["store"]
            store.update(location=masked(location), open=True, since=time.time(),
                         error=None)
        self.write()

    def store_failed(self, location: str, error: BaseException) -> None:
        with self._lock:
            now = time.time()
            text = masked(f"{type(error).__name__}: {error}")
            self.data["store"].update(location=masked(location), open=False, since=now,
                                      error=text, last_failure={"time": now, "error": text})
            self._error(f"cannot open the store: {error}")
        self.write()

    def config_failed(self, error: BaseException | str) -> None:
        """A configuration that did not load (SIGHUP): the running one is kept."""
        with self._lock:
            self.data["config_error"] = {"time": time.time(), "error": masked(str(error))}
        self.write()

    def config_loaded(self) -> None:
        with self._lock:
            self.data["config_error"] = None
        self.write()

    def observe(self, outcome: Outcome) -> None:
        """Count one logged message (a logs observer)."""
        with self._lock:
            now = time.time()
            data, recent = self.data, self._recent
            data["messages"] += 1
            recent.add("messages", now)
            if outcome.verdict is not None:
                verdicts = data["verdicts"]
                name = str(outcome.verdict.kind)
                verdicts[name] = verdicts.get(name, 0) + 1
            decisions = data["decisions"]
            decisions[outcome.decision] = decisions.get(outcome.decision, 0) + 1
            store = data["store"]
            if outcome.error:
                self._error(outcome.error, queue=outcome.queue)
                recent.add("errors", now)
                if outcome.verdict is None:
                    data["unchecked"] += 1
                    recent.add("unchecked", now)
                if outcome.store_fault:
                    store["last_failure"] = {"time": now, "error": masked(outcome.error)[:500]}
            if outcome.recorded == "failed":
                data["record_failures"] += 1
                recent.add("record_failures", now)
                data["last_record_failure"] = {"time": now, "queue": outcome.queue}
                store["last_failure"] = {"time": now, "error": "recording failed"}
            elif outcome.verdict is not None and not outcome.error:
                store["last_ok"] = now
                if outcome.recorded in ("yes", True):
                    recent.add("recorded", now)
            self._dirty = True

    def _error(self, text: str, queue: str | None = None) -> None:
        self.data["errors"] += 1
        self.data["last_error"] = {"time": time.time(), "error": masked(str(text))[:500],
                                   "queue": queue}

    def set_state(self, state: str) -> None:
        with self._lock:
            self.data["state"] = state
            if state == "stopped":
                self.data["stopped"] = time.time()
        self.write()

    # -- the file ---------------------------------------------------------------------

    def write(self) -> None:
        if self.path is None or self._failed:
            return
        with self._lock:
            now = time.time()
            self.data["updated"] = now
            self.data["recent"] = {"seconds": RECENT_SECONDS, **self._recent.totals(now)}
            self._dirty = False
            text = json.dumps(self.data, sort_keys=True)
        scratch = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        if not self.path.parent.is_dir():
            self._failed = True
            self.logger.info("no status file: %s does not exist (`dupfilter-db status` will "
                             "not see this daemon; --status-dir DIR)", self.path.parent)
            return
        try:
            with open(scratch, "w", encoding="utf-8") as handle:
                handle.write(text + "\n")
            os.chmod(scratch, 0o644)
            os.replace(scratch, self.path)
        except OSError as error:
            self._failed = True
            self.logger.warning("cannot keep the status in %s (%s): `dupfilter-db status` "
                                "will not see this daemon", self.path,
                                error.strerror or error)

    def start(self) -> DaemonStatus:
        """Write the file, then keep it fresh from a thread of its own."""
        self.write()
        if self.path is not None and not self._failed:
            self._thread = threading.Thread(target=self._beat, name="dupfilter-status",
                                            daemon=True)
            self._thread.start()
        return self

    def _beat(self) -> None:
        """Write what changed within half a second, and every ``heartbeat`` anyway."""
        while not self._stop.wait(min(0.5, self.heartbeat)):
            if self._dirty or time.time() - self.data["updated"] >= self.heartbeat:
                self.write()

    def stop(self) -> None:
        """The daemon has stopped cleanly: say so in the file (status shows it stopped)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        self.set_state("stopped")


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except PermissionError:
        return pid > 0                 # another user's process: it exists
    except (ProcessLookupError, OverflowError, ValueError):
        return False
    return pid > 0


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else -1
                 for part in version.replace("-", ".").replace("+", ".").split("."))


def read_status(path: Path, now: float | None = None, installed: str = __version__
                ) -> dict[str, Any]:
    """One status file, with ``alive`` (the process exists), ``fresh`` (written within
    STALE_SECONDS), ``severity`` (OK, WARNING, CRITICAL: the monitoring-plugin codes),
    ``problems`` (why, in words), ``healthy`` (no problem) and ``clean_stop`` (stopped on
    purpose: not a problem) added.  ``installed`` is the version a restart would run."""
    now = time.time() if now is None else now
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    critical: list[str] = []
    warning: list[str] = []
    pid = int(data.get("pid", 0))
    alive = _process_exists(pid)
    age = now - float(data.get("updated", 0))
    stale_after = max(STALE_SECONDS, 3 * float(data.get("heartbeat_seconds", 0) or 0))
    fresh = age <= stale_after
    stopped = data.get("state") == "stopped"
    if stopped:
        pass                            # stopped on purpose: said, not a problem
    elif not alive:
        critical.append(f"not running (pid {pid} is gone; it did not stop cleanly)")
    elif not fresh:
        critical.append(f"no heartbeat for {age:.0f} s (hung?)")
    running = alive and not stopped
    store = data.get("store") or {}
    recent = data.get("recent") or {}
    minutes = f"{int(recent.get('seconds', RECENT_SECONDS)) // 60} min"
    if running:
        if not store.get("open"):
            critical.append("store not open" + (f": {store['error']}" if store.get("error")
                                                else ""))
        unchecked = int(recent.get("unchecked", 0))
        if unchecked:
            critical.append(f"{unchecked} of {recent.get('messages', 0)} message(s) in the "
                            f"last {minutes} passed unchecked (on_error="
                            f"{data.get('on_error')})")
        failures = int(recent.get("record_failures", 0))
        if failures:
            text = (f"recording failed for {failures} message(s) in the last {minutes} "
                    f"({recent.get('recorded', 0)} recorded): later copies are not caught")
            (critical if failures >= int(recent.get("recorded", 0)) else warning).append(text)
        errors = int(recent.get("errors", 0)) - unchecked
        if errors > 0:
            warning.append(f"{errors} error(s) in the last {minutes}")
        if data.get("config_error"):
            warning.append(f"configuration not loaded: {data['config_error']['error']} "
                           "(running on the previous one)")
        version = str(data.get("version", ""))
        if version and version != installed and _version_key(version) < _version_key(
                installed):
            warning.append(f"restart needed: running {version}, installed {installed}")
    severity = CRITICAL if critical else WARNING if warning else OK
    problems = critical + warning
    data.update(path=str(path), alive=alive, fresh=fresh, age_seconds=round(age, 1),
                healthy=not problems, problems=problems, clean_stop=stopped,
                severity=SEVERITY_NAMES[severity], exit_code=severity)
    return data
