"""``dupfilter-smtpd``: an SMTP content filter on aiosmtpd.

Postfix (after-queue ``content_filter``, or before-queue ``smtpd_proxy_filter``) hands a
message to this daemon; it runs the core once, acts on the verdict, and re-injects the
message into the next hop with the original envelope.  The next hop sees each command as the
upstream sends it: MAIL opens a transaction there at the first RCPT, every RCPT gets the
next hop's own answer (so per-recipient refusals reach Postfix as such), and at the end of
DATA the (tagged) message goes on, or the transaction is dropped (discard, reject, tempfail).

No mail is lost: when the next hop is down or refuses, the upstream gets a 4xx (or the next
hop's own 5xx) and keeps the message; an internal error falls back to ``on_error``
(pass through untagged, or 451), never to reject or discard.  Only messages the next hop
accepted are recorded in the store.

    dupfilter-smtpd --config /etc/dupfilter/dupfilter.toml --listen 127.0.0.1:10025 \\
        --next-hop 127.0.0.1:10026 --db /var/lib/dupfilter

This module is the server (listening socket, next-hop pool, worker threads, signals) and
the command line; :mod:`.handler` does the work of each message, :mod:`.protocol` holds
the aiosmtpd overrides, :mod:`.nexthop` the SMTP client, :mod:`.wire` the wire format.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import functools
import logging
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from mailfilter import __version__, metrics
from mailfilter.config import (
    ConfigError,
    Settings,
    check_flag,
    check_seconds,
    check_smtpd_settings,
    check_store_flag,
    check_user,
    parse_hostport,
    set_by_flag,
)
from mailfilter.logs import OutcomeLog, setup_logging
from mailfilter.service import (
    DaemonError,
    DaemonStatus,
    LazyEngine,
    check_privileges,
    daemon_parser,
    exit_on_config_error,
    instance_name,
    load_daemon_settings,
    reload_settings,
    sd_notify,
)
from mailfilter.smtpd.handler import PROGRAM, FilterHandler
from mailfilter.smtpd.lifecycle import Lifecycle
from mailfilter.smtpd.nexthop import DEFAULT_CONNECTIONS, NextHop
from mailfilter.smtpd.protocol import FilterSMTP

if TYPE_CHECKING:
    from mailfilter.engine import Engine

# On SIGTERM, transactions in flight get this long to finish.
DRAIN_SECONDS = 30.0
# [smtpd] keys that SIGHUP cannot change: the listening socket, the next-hop pool and
# the mode are set up at start.
_RESTART_KEYS = ("listen", "next_hop", "mode")


class FilterServer:
    """The listening server, its next-hop pool and worker threads; start and stop."""

    def __init__(self, settings: Settings, engine: Engine | LazyEngine, logger: logging.Logger,
                 *, connections: int = DEFAULT_CONNECTIONS, hostname: str | None = None
                 ) -> None:
        check_smtpd_settings(settings)
        self.settings = settings
        # An open engine (tests, embedding) or the daemon's, opened when the store can be.
        self.engines = engine if isinstance(engine, LazyEngine) else LazyEngine(
            settings, logger, "smtpd", engine=engine)
        self.logger = logger
        # What the sessions share with the server: draining, sessions, tasks, and every
        # message's line with its observers (status, counters, metrics: main()).
        self.life = Lifecycle(OutcomeLog(logger))
        self.outcomes = self.life.outcomes
        self.connections = connections
        self.hostname = hostname or socket.gethostname() or "localhost"
        self.pool: NextHop | None = None
        self.executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._server: asyncio.base_events.Server | None = None
        self.address: tuple[str, int] | None = None

    async def start(self, sock: socket.socket | None = None) -> None:
        """Listen (on ``sock``, or ``smtpd.listen``) and start serving."""
        smtpd = self.settings.smtpd
        hop_host, hop_port = parse_hostport(smtpd.next_hop, "smtpd.next_hop")
        self.pool = NextHop(hop_host, hop_port, helo=self.hostname, timeout=smtpd.timeout,
                            size=self.connections)
        self.pool.start()
        self.executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(2, min(4, self.connections)), thread_name_prefix="dupfilter")
        handler = FilterHandler(self.settings, self.engines, self.pool, self.executor,
                                self.logger, self.life)

        def factory() -> FilterSMTP:
            return FilterSMTP(handler, self.life, data_size_limit=smtpd.max_message_bytes or None,
                              enable_SMTPUTF8=True, decode_data=False,
                              hostname=self.hostname, ident=f"dupfilter-smtpd {__version__}",
                              timeout=smtpd.timeout)

        loop = asyncio.get_running_loop()
        if sock is None:
            host, port = parse_hostport(smtpd.listen, "smtpd.listen")
            self._server = await loop.create_server(factory, host, port, backlog=128,
                                                    reuse_address=True)
        else:
            self._server = await loop.create_server(factory, sock=sock, backlog=128)
        self.address = self._server.sockets[0].getsockname()[:2]

    @property
    def port(self) -> int:
        assert self.address is not None
        return self.address[1]

    async def stop(self, grace: float = DRAIN_SECONDS) -> None:
        """Stop listening, let transactions in flight finish (up to ``grace``), close."""
        self.life.draining = True
        if self._server is not None:
            self._server.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while self.life.sessions or self.life.tasks:
            for session in list(self.life.sessions):
                if session.idle() and session.transport is not None:
                    session.transport.write(b"421 4.3.2 Service shutting down\r\n")
                    session.close_transport()
            if loop.time() > deadline:
                self.logger.warning("shutdown: giving up on %d sessions in flight",
                                    len(self.life.sessions))
                for session in list(self.life.sessions):
                    session.close_transport()
                break
            await asyncio.sleep(0.02)
        if self.life.tasks:
            await asyncio.wait(list(self.life.tasks), timeout=5)
        if self._server is not None:
            await self._server.wait_closed()
        if self.pool is not None:
            self.pool.close()
        if self.executor is not None:
            self.executor.shutdown(wait=True)


def build_parser() -> argparse.ArgumentParser:
    parser = daemon_parser(PROGRAM, "SMTP content filter: tag, reject or drop duplicate and "
                           "near-duplicate mail, then pass it on to the next hop.")
    parser.add_argument("--listen", metavar="HOST:PORT",
                        help="where to accept mail (overrides smtpd.listen)")
    parser.add_argument("--next-hop", metavar="HOST:PORT",
                        help="where to re-inject it (overrides smtpd.next_hop)")
    parser.add_argument("--connections", type=int, default=DEFAULT_CONNECTIONS, metavar="N",
                        help="at most N kept-open connections to the next hop; keep it at "
                             "or below that smtpd's maxproc (default %(default)s)")
    return parser


def _bind(listen: str) -> socket.socket:
    host, port = parse_hostport(listen, "smtpd.listen")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        family, _, _, _, address = infos[0]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as error:
        raise DaemonError(f"cannot listen on {listen}: {error.strerror or error}") from None
    sock.setblocking(False)
    return sock


async def serve(settings: Settings, args: argparse.Namespace, logger: logging.Logger) -> int:
    """Bind, drop privileges, open the store, serve until SIGTERM/SIGINT."""
    sock = _bind(settings.smtpd.listen)
    try:
        check_privileges(args.user, args.allow_root, logger)
    except BaseException:
        sock.close()
        raise
    engines = LazyEngine(settings, logger, "smtpd", retry_seconds=args.store_retry)
    status = DaemonStatus(PROGRAM, getattr(args, "status_dir", None) or None, logger,
                          listening=settings.smtpd.listen, store=settings.store.location(),
                          on_error=settings.smtpd.on_error,
                          instance=instance_name(PROGRAM, getattr(args, "instance", None))
                          ).start()
    engines.status = status
    engines.open()          # or: one clear line, on_error per message, tried again later
    server = FilterServer(settings, engines, logger, connections=args.connections)
    server.outcomes.observers += [status.observe, engines.count_decision]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    loop.add_signal_handler(signal.SIGHUP, functools.partial(
        reload_settings, settings, _settings_loader(args, settings, logger), "smtpd",
        _RESTART_KEYS, logger, status))
    try:
        await server.start(sock=sock)
        serving = metrics.start(settings.metrics, "smtpd", records=engines.records,
                                store_up=lambda: engines.is_open)
        if serving is not None:
            server.outcomes.observers.append(serving.observe)
            logger.info("metrics on http://%s/metrics", serving.listen)
        logger.info("%s %s listening on %s, next hop %s, mode %s, store %s", PROGRAM,
                    __version__, settings.smtpd.listen, settings.smtpd.next_hop,
                    settings.smtpd.mode, settings.store.location())
        status.set_state("running")
        sd_notify("READY=1", f"STATUS=listening on {settings.smtpd.listen}; " + (
            "store open" if engines.is_open else
            f"store NOT open (messages get on_error={settings.smtpd.on_error}; "
            "`dupfilter-db status`)"))
        await stop.wait()
        sd_notify("STOPPING=1")
        status.set_state("stopping")
        logger.info("shutting down: finishing transactions in flight")
        await server.stop()
    finally:
        engines.close()
        server.outcomes.observers.clear()
        status.stop()
    logger.info("stopped")
    return 0


def _with_flags(settings: Settings, args: argparse.Namespace) -> Settings:
    """The command line's values over the file's, each reported against its flag when
    refused (``--listen: smtpd.listen = ...``)."""
    if args.db is not None:
        set_by_flag(settings, "store.path", "--db", args.db, check_store_flag)
    if args.listen is not None:
        set_by_flag(settings, "smtpd.listen", "--listen", args.listen)
    if args.next_hop is not None:
        set_by_flag(settings, "smtpd.next_hop", "--next-hop", args.next_hop)
    return settings


def _settings_loader(args: argparse.Namespace, running: Settings,
                     logger: logging.Logger) -> Callable[[], Settings]:
    """The settings as at start-up (file, then flags), for SIGHUP; the mode stays."""
    def load() -> Settings:
        fresh = _with_flags(load_daemon_settings(args), args)
        if fresh.smtpd.mode != running.smtpd.mode:
            logger.warning("SIGHUP: smtpd.mode changed; it takes effect after a restart")
        fresh.smtpd.mode = running.smtpd.mode
        check_smtpd_settings(fresh)
        return fresh
    return load


def main(argv: Sequence[str] | None = None) -> int:
    """Console script ``dupfilter-smtpd``."""
    args = build_parser().parse_args(argv)
    try:
        settings = _with_flags(load_daemon_settings(args), args)
        check_smtpd_settings(settings)
        if not 1 <= args.connections <= 1000:
            raise ConfigError(f"--connections {args.connections} is not from 1 to 1000; "
                              "expected the number of kept-open next-hop connections, at or "
                              "below the re-injection smtpd's maxproc, e.g. 10")
        check_flag("--store-retry", check_seconds, args.store_retry)
        if args.user is not None:
            check_flag("--user", check_user, args.user)
    except ConfigError as error:
        return exit_on_config_error(PROGRAM, error)
    logger = setup_logging(settings.log)
    logging.getLogger("mail.log").setLevel(logging.WARNING)   # aiosmtpd's chatter
    try:
        return asyncio.run(serve(settings, args, logger))
    except DaemonError as error:
        return exit_on_config_error(PROGRAM, error)
    except Exception as error:      # the store cannot be opened, and the like
        print(f"{PROGRAM}: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
