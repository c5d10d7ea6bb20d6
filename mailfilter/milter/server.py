"""``dupfilter-milter``: serving the milter (pymilter/libmilter), from the command line to
SIGTERM.  See docs/postfix.md and docs/sendmail.md.

Opening the socket (TCP_NODELAY on it), giving up root, running libmilter in a thread of
its own while the main thread takes the signals (SIGHUP reloads, SIGTERM drains the
messages in flight).  The work on each message is in :mod:`mailfilter.milter.session`.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import socket
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterable

import Milter

from mailfilter import __version__, metrics
from mailfilter.config import (
    ConfigError,
    Settings,
    check_flag,
    check_milter_settings,
    check_seconds,
    check_store_flag,
    check_user,
    set_by_flag,
)
from mailfilter.logs import setup_logging
from mailfilter.milter.session import (
    ACTION_FLAGS,
    PROGRAM,
    DupfilterMilter,
    NoDataMilter,
    Runtime,
)
from mailfilter.service import (
    STORE_RETRY_SECONDS,
    DaemonError,
    DaemonStatus,
    check_privileges,
    daemon_parser,
    exit_on_config_error,
    install_shutdown_handler,
    instance_name,
    load_daemon_settings,
    reload_settings,
    sd_notify,
    set_socket_permissions,
)

# Seconds SIGTERM waits for messages in flight before exiting anyway.
SHUTDOWN_GRACE_SECONDS = 30.0
# After the drain: time for libmilter to send the last answers (see serve()).
REPLY_SECONDS = 0.2
SWITCH_INTERVAL = 0.0005
SHUTDOWN_SIGNALS = {signal.SIGHUP, signal.SIGINT, signal.SIGTERM}
# [milter] keys that SIGHUP cannot change: the socket is open and libmilter has its timeout.
_RESTART_KEYS = ("socket", "socket_mode", "socket_group", "timeout")
_INET = re.compile(r"^inet6?:(\d+)(?:@(.*))?$")


def _mode(path: str) -> int:
    try:
        return os.lstat(path).st_mode
    except OSError:
        return 0


def set_listener_nodelay(spec: str, logger: logging.Logger,
                         fds: Iterable[int] | None = None) -> int:
    """Set TCP_NODELAY on libmilter's listening socket for ``spec``; returns how many.

    libmilter does not set it; Linux copies it to every accepted connection, so the
    milter's replies (e.g. a header change followed by ACCEPT) are not held back by Nagle
    waiting for the MTA's delayed ACK (docs/postfix.md, "TCP and Nagle").
    """
    found = _INET.match(spec)
    if not found:
        return 0
    port = int(found.group(1))
    changed = 0
    for fd in fds if fds is not None else range(3, 1024):
        try:
            if not stat.S_ISSOCK(os.fstat(fd).st_mode):
                continue
        except OSError:
            continue
        try:
            sock = socket.socket(fileno=os.dup(fd))
        except OSError:
            continue
        try:
            if sock.family not in (socket.AF_INET, socket.AF_INET6):
                continue
            if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
                continue
            if sock.getsockname()[1] != port:
                continue
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            changed += 1
        except OSError as error:
            logger.warning("cannot set TCP_NODELAY on the milter socket: %s", error)
        finally:
            sock.close()
    if not changed:
        logger.warning("listening socket for %s not found; TCP_NODELAY not set", spec)
    return changed


def _event(command: str, method: str) -> Callable[..., int]:
    """libmilter's callback for one event: the connection's :class:`DupfilterMilter`
    method, as pymilter's runmilter() calls it.

    The object is made at option negotiation (or at CONNECT, for an MTA that does not
    negotiate).  An MTA that sends ``command`` before either has none: libmilter still
    calls this, and pymilter's own lambdas then raise AttributeError (a traceback in the
    log, ``451 4.3.0 pymilter: untrapped exception`` to the MTA).  Here that is a clean
    TEMPFAIL and one warning line (see :meth:`DupfilterMilter.out_of_order`).
    """
    def callback(ctx: object, *args: object) -> int:
        session = ctx.getpriv()  # type: ignore[attr-defined]
        if session is None:
            return DupfilterMilter.out_of_order(f"{command} before option negotiation")
        return getattr(session, method)(*args)
    return callback


def _abort(ctx: object) -> int:
    session = ctx.getpriv()  # type: ignore[attr-defined]
    return Milter.CONTINUE if session is None else session.abort()


def _register(name: str, timeout: int) -> None:
    """pymilter's runmilter() up to milter.opensocket(), split so we can act in between."""
    milter = Milter.milter
    milter.set_flags(ACTION_FLAGS)
    milter.set_connect_callback(Milter.connect_callback)
    milter.set_helo_callback(_event("HELO", "hello"))
    milter.set_envfrom_callback(_event("MAIL", "envfrom_bytes"))
    milter.set_envrcpt_callback(_event("RCPT", "envrcpt_bytes"))
    milter.set_header_callback(_event("a header", "header_bytes"))
    milter.set_eoh_callback(_event("end of headers", "eoh"))
    milter.set_body_callback(_event("body", "body"))
    milter.set_eom_callback(_event("end of message", "eom"))
    milter.set_abort_callback(_abort)
    milter.set_close_callback(Milter.close_callback)
    if timeout > 0:
        milter.settimeout(timeout)
    milter.register(name, data=_event("DATA", "data"),
                    unknown=_event("an unknown command", "unknown"),
                    negotiate=Milter.negotiate_callback)


_WARM_UP = (
    b"From: a@localhost\r\nSubject: =?iso-8859-1?q?warm-up_=E9?=\r\nMIME-Version: 1.0\r\n"
    b"Message-ID: <warm-up@localhost>\r\n"
    b"Content-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n"
    b"Content-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: "
    b"quoted-printable\r\n\r\none two three four five six seven eight nine ten =E9l=E8ve "
    b"eleven twelve thirteen\r\n> quoted line\r\n-- \r\nsignature\r\n--b\r\n"
    b"Content-Type: text/html; charset=utf-8\r\n\r\n<p>one <b>two</b> three four five six "
    b"seven eight nine ten eleven twelve</p>\r\n--b\r\nContent-Type: application/pdf\r\n"
    b"Content-Transfer-Encoding: base64\r\n\r\n" + b"JVBERi0xLjQK" * 200 + b"\r\n--b--\r\n")


def _preload(settings: Settings) -> None:
    """Load the engine and the store backend (numpy, lmdb and their lazy imports) before
    giving up root: the Python installation may not be readable by the unprivileged user.
    For LMDB, a throwaway store is opened and removed, which runs every import it needs."""
    import copy
    import importlib
    import shutil
    import tempfile

    from mailfilter.engine import Engine
    from mailfilter.fingerprint import use_numpy
    use_numpy()     # long messages are hashed with it (the pipe filter's start goes without)
    location = settings.store.location()
    if location.startswith(("redis://", "rediss://", "unix://")):
        try:
            importlib.import_module("mailfilter.store.redis")
        except ImportError:
            pass  # reported clearly when the store is opened
        return
    scratch = tempfile.mkdtemp(prefix="dupfilter-preload-")
    try:
        trial = copy.deepcopy(settings)
        trial.store.path = os.path.join(scratch, "db")
        trial.store.map_size_mb = 1
        with Engine(trial) as engine:
            engine.check(_WARM_UP, ["warm-up@localhost"], record=True)
    except Exception:  # noqa: BLE001 - only a warm-up; the real store reports its own errors
        pass
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def serve(settings: Settings, logger: logging.Logger, *, user: str | None = None,
          allow_root: bool = False, tcp_fixes: bool = True,
          store_retry: float = STORE_RETRY_SECONDS, group_commit: bool = True,
          reload: Callable[[], Settings] | None = None, status_dir: str | None = None,
          instance: str | None = None) -> int:
    """Open the socket, drop privileges, run until SIGTERM; returns the exit status.

    SIGHUP calls ``reload`` for fresh settings and applies the ``[milter]`` ones and the log
    level (see :func:`apply_reload`); SIGTERM and SIGINT stop.
    """
    m = settings.milter
    spec = m.socket
    # Session threads mostly wait on sockets and need the GIL for short bursts; with the
    # default 5 ms switch interval each can wait that long behind one checking a big message.
    sys.setswitchinterval(SWITCH_INTERVAL)
    runtime = Runtime(settings, logger, retry_seconds=store_retry, group_commit=group_commit)
    DupfilterMilter.runtime = runtime
    tcp = spec.startswith(("inet:", "inet6:"))
    Milter.factory = DupfilterMilter if tcp and tcp_fixes else NoDataMilter
    milter = Milter.milter
    _register(PROGRAM, m.timeout)
    milter.setconn(spec)
    path = spec.split(":", 1)[1] if spec.startswith(("unix:", "local:")) else None
    if path:
        folder = os.path.dirname(path) or "."
        if not os.path.isdir(folder):
            raise DaemonError(f"socket {spec}: folder {folder} does not exist")
        old = os.umask(0o777 & ~int(m.socket_mode, 8))
        try:
            milter.opensocket(True)
        finally:
            os.umask(old)
        set_socket_permissions(path, m.socket_mode, m.socket_group, logger)
    else:
        try:
            milter.opensocket(True)
        except milter.error as error:
            raise DaemonError(f"cannot listen on {spec}: {error}") from None
        if tcp_fixes:
            set_listener_nodelay(spec, logger)
    _preload(settings)
    check_privileges(user, allow_root, logger)
    status = DaemonStatus(PROGRAM, status_dir, logger, listening=spec,
                          store=settings.store.location(), on_error=m.on_error,
                          instance=instance_name(PROGRAM, instance)).start()
    runtime.engines.status = status
    runtime.open_engine()
    runtime.outcomes.observers += [status.observe, runtime.engines.count_decision]
    try:
        serving = metrics.start(settings.metrics, "milter", records=runtime.store_records,
                                store_up=lambda: runtime.engines.is_open)
    except (OSError, ValueError) as error:
        raise DaemonError(f"cannot serve metrics on {settings.metrics.listen}: {error}") \
            from None
    if serving is not None:
        runtime.outcomes.observers.append(serving.observe)
        logger.info("metrics on http://%s/metrics", serving.listen)
    actions = m.actions
    logger.info("%s %s listening on %s (unique=%s duplicate=%s near-duplicate=%s "
                "on_error=%s scope=%s)", PROGRAM, __version__, spec, actions.unique,
                actions.duplicate, actions.near_duplicate, m.on_error,
                settings.detector.scope)
    stop = threading.Event()
    failure: list[str] = []

    def run_libmilter() -> None:
        try:
            milter.main()
        except milter.error as error:
            failure.append(str(error))
        finally:
            stop.set()

    # libmilter runs in a thread of its own, created while the shutdown signals are blocked
    # (it and its session threads inherit that).  The main thread alone takes them, so that
    # SIGTERM reaches our handler and not libmilter's signal thread: libmilter's own stop
    # drops the sessions at once (Debian builds it with a worker pool), messages included.
    runner = threading.Thread(target=run_libmilter, name="libmilter", daemon=True)
    runner.start()

    reload_requested = threading.Event()

    def on_signal(signum: int) -> None:
        if signum == signal.SIGHUP:
            reload_requested.set()
        elif not runtime.stopping:
            runtime.stopping = True
        stop.set()

    install_shutdown_handler(on_signal, SHUTDOWN_SIGNALS)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SHUTDOWN_SIGNALS)
    status.set_state("running")
    sd_notify("READY=1", f"STATUS=listening on {spec}; " + (
        "store open" if runtime.engines.is_open else
        f"store NOT open (messages get on_error={m.on_error}; `dupfilter-db status`)"))
    while True:
        stop.wait(1.0)
        if reload_requested.is_set():
            reload_requested.clear()
            stop.clear()
            if reload is None:
                logger.warning("SIGHUP: nothing to reload")
            else:
                reload_settings(runtime.settings, reload, "milter", _RESTART_KEYS, logger,
                                status)
        if runtime.stopping or failure:
            break
        if not runner.is_alive():
            # libmilter ended by itself: its signal thread can take a SIGTERM (sigwait
            # accepts a signal the others block).  Stop as for our own SIGTERM; before,
            # this loop spun on the set event at full CPU and the daemon never exited.
            logger.info("libmilter stopped; stopping")
            break
    signal.pthread_sigmask(signal.SIG_BLOCK, SHUTDOWN_SIGNALS)
    runtime.stopping = True
    sd_notify("STOPPING=1")
    if failure:
        logger.error("milter stopped: %s", failure[0])
    else:
        busy = runtime.inflight
        logger.info("stopping: %d message(s) in flight; new messages get 451", busy)
        if not runtime.drain(SHUTDOWN_GRACE_SECONDS):
            logger.warning("stopping with %d message(s) still in flight after %ds",
                           runtime.inflight, SHUTDOWN_GRACE_SECONDS)
        # A message stops being in flight when its end-of-message callback returns;
        # libmilter writes the answer after that.  Leaving at once could cut it off (seen
        # once the decision count no longer took a commit of its own after the message).
        time.sleep(REPLY_SECONDS)
        # No milter.stop(): smfi_stop() waits for the listener's lock, which libmilter holds
        # through 5-second polls.  Nothing is in flight any more: remove the socket, leave.
        if path and stat.S_ISSOCK(_mode(path)):
            try:
                os.unlink(path)
            except OSError:
                pass
    status.set_state("stopping")
    runtime.close()             # commits the records still queued
    runtime.outcomes.observers.clear()
    status.stop()
    logger.info("%s stopped", PROGRAM)
    return 1 if failure else 0


def build_parser() -> argparse.ArgumentParser:
    parser = daemon_parser(PROGRAM, "Duplicate and near-duplicate mail milter for Postfix "
                           "and Sendmail.  Flags override the configuration file.")
    parser.add_argument("--socket", metavar="SPEC",
                        help="inet:PORT@HOST or unix:/path (overrides milter.socket)")
    parser.add_argument("--sync-record", dest="group_commit", action="store_false",
                        help="record each accepted message in its own transaction before "
                             "answering the MTA (one disk sync per message: slower)")
    parser.add_argument("--no-tcp-fixes", dest="tcp_fixes", action="store_false",
                        help="for measurements only: leave Nagle on (no TCP_NODELAY) and "
                             "skip the DATA event (about +90 ms a message over TCP)")
    return parser


def settings_with_flags(args: argparse.Namespace) -> Settings:
    """The file's settings with the command line's over them, each flag's value checked
    and, when refused, reported against the flag (``--socket: milter.socket = ...``)."""
    settings = load_daemon_settings(args)
    if args.db is not None:
        set_by_flag(settings, "store.path", "--db", args.db, check_store_flag)
    if args.socket is not None:
        set_by_flag(settings, "milter.socket", "--socket", args.socket)
    check_milter_settings(settings)
    return settings


def main(argv: list[str] | None = None) -> int:
    """Console script ``dupfilter-milter``."""
    # Only the main thread may take SIGTERM/SIGHUP/SIGINT (see serve()).  Block them now,
    # before numpy (imported with the engine) starts its BLAS threads: a thread that does
    # not block them would take SIGTERM's default action and kill the process outright.
    signal.pthread_sigmask(signal.SIG_BLOCK, SHUTDOWN_SIGNALS)
    args = build_parser().parse_args(argv)
    try:
        settings = settings_with_flags(args)
        check_flag("--store-retry", check_seconds, args.store_retry)
        if args.user is not None:
            check_flag("--user", check_user, args.user)
        logger = setup_logging(settings.log, PROGRAM)
        if os.geteuid() == 0 and not args.user and not args.allow_root:
            raise DaemonError("refusing to run as root: pass --user NAME to switch to an "
                              "unprivileged user, or --allow-root")

        def reload() -> Settings:
            return settings_with_flags(args)

        status = serve(settings, logger, user=args.user, allow_root=args.allow_root,
                       tcp_fixes=args.tcp_fixes, store_retry=args.store_retry,
                       group_commit=args.group_commit, reload=reload,
                       status_dir=args.status_dir or None, instance=args.instance)
    except (ConfigError, DaemonError) as error:
        return exit_on_config_error(PROGRAM, error)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    # libmilter's session threads are not Python threads: skip interpreter finalisation.
    os._exit(status)
