"""The daemons' life cycle (``dupfilter-milter``, ``dupfilter-smtpd``): nothing here knows
a mail protocol.

The shared engine, opened lazily when the store cannot be opened at start; the common
command-line flags and settings; SIGHUP's reload; shutdown signals; systemd's readiness
notification; refusing root or dropping to an unprivileged user.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from types import FrameType
from typing import TYPE_CHECKING

from mailfilter import __version__
from mailfilter.config import ConfigError, Settings, load_settings

if TYPE_CHECKING:
    from mailfilter.engine import Engine


class DaemonError(RuntimeError):
    """A start-up problem worded for the postmaster (exit status 2, no traceback)."""


# ------------------------------------------------------------------------ the engine

# How often a daemon tries again to open a store it could not open (--store-retry).
STORE_RETRY_SECONDS = 10.0


class LazyEngine:
    """A daemon's shared engine: opened at start-up when the store can be, and otherwise
    tried again when a message needs it, at most every ``retry_seconds``.

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

    def get(self) -> Engine | None:
        """The engine, opening it (again) when it is missing and it is time to try."""
        engine = self._engine
        if engine is not None:
            return engine
        with self._lock:
            if self._engine is None and time.monotonic() >= self._next_attempt:
                self.open()
            return self._engine

    def open(self) -> bool:
        """Try to open the store; log clearly when it cannot be opened."""
        location = self.settings.store.location()
        try:
            from mailfilter.engine import Engine
            self._engine = Engine(self.settings)
        except Exception as error:  # any failure means "no store yet"
            self._next_attempt = time.monotonic() + self.retry_seconds
            self.logger.error(
                "cannot open the store at %s: %s; messages get on_error=%s until it opens "
                "(retrying every %gs)", location, error,
                getattr(self.settings, self.section).on_error, self.retry_seconds)
            return False
        self.logger.info("store opened: %s", location)
        return True

    def records(self) -> float:
        """Records in the store, for the metrics gauge (NaN while the store is down)."""
        engine = self.get()
        try:
            return float(engine.store.stats()["records"]) if engine else float("nan")
        except Exception:  # noqa: BLE001 - a scrape must not fail
            return float("nan")

    def close(self) -> None:
        with self._lock:
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
    return parser


def load_daemon_settings(args: argparse.Namespace) -> Settings:
    """Settings from ``--config`` (or the search order) with ``--db`` applied."""
    settings = load_settings(getattr(args, "config", None))
    db = getattr(args, "db", None)
    if db:
        settings.store.path = db
    return settings


# Sections a running daemon cannot take over on SIGHUP: the store stays open, and
# fingerprints, detector and rules must stay those the store's records were made with.
_RESTART_SECTIONS = ("store", "fingerprint", "detector", "policy", "metrics")


def reload_settings(running: Settings, load: Callable[[], Settings], section: str,
                    restart_keys: Iterable[str], logger: logging.Logger) -> bool:
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
            return False
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
        os.setgroups(sorted({entry.pw_gid, *groups}))
        os.setgid(entry.pw_gid)
        os.setuid(entry.pw_uid)
        os.environ["HOME"] = entry.pw_dir
        os.environ["USER"] = os.environ["LOGNAME"] = entry.pw_name
        if os.geteuid() == 0 or os.getuid() == 0:
            raise DaemonError(f"--user {user}: could not drop root privileges")
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
