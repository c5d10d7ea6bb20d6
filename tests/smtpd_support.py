"""Test helpers: ``dupfilter-smtpd`` as its own process, and the master.cf of its loop.

    after-queue:  client ─► smtpd :entry (content_filter=scan:[127.0.0.1]:F)
                  ─► scan (smtp) ─► dupfilter-smtpd :F ─► smtpd :R (re-injection) ─► sink
    proxy:        client ─► smtpd :P (smtpd_proxy_filter=127.0.0.1:F2)
                  ─► dupfilter-smtpd :F2 (mode proxy) ─► smtpd :R ─► sink

The re-injection smtpd takes its recipient restrictions from the main.cf parameter
``reinject_recipient_restrictions``, which the harness's ``main_cf`` must define.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from postfix_harness import wait_for_port


def filter_master_cf(filter_port: int, reinject_port: int, proxy_port: int | None = None,
                     proxy_filter_port: int | None = None, *, entry_port: int | None = None,
                     maxproc: int = 10) -> list[str]:
    """master.cf lines of the filter loop (docs/postfix.md shows the same entries).

    ``entry_port``: an extra entry smtpd (no milters) whose content_filter is the filter,
    for an instance whose main listener does something else.  ``proxy_port`` and
    ``proxy_filter_port``: the before-queue proxy entry too.  ``maxproc``: processes of the
    scan and re-injection services (dupfilter-smtpd's ``--connections`` should not exceed it).
    """
    lines = []
    if entry_port is not None:
        lines += [f"127.0.0.1:{entry_port} inet n  -       n       -       -       smtpd",
                  f"  -o content_filter=scan:[127.0.0.1]:{filter_port}",
                  "  -o receive_override_options=no_address_mappings",
                  "  -o smtpd_milters="]
    if proxy_port is not None and proxy_filter_port is not None:
        lines += [f"127.0.0.1:{proxy_port} inet n  -       n       -       10      smtpd",
                  f"  -o smtpd_proxy_filter=127.0.0.1:{proxy_filter_port}",
                  "  -o smtpd_client_connection_count_limit=10"]
    return lines + [
        f"scan      unix  -       -       n       -       {maxproc}      smtp",
        "  -o smtp_send_xforward_command=yes",
        "  -o disable_mime_output_conversion=yes",
        "  -o smtp_generic_maps=",
        f"127.0.0.1:{reinject_port} inet n  -       n       -       {maxproc}      smtpd",
        *reinjection_options(),
    ]


def reinjection_options(recipient_restrictions: str = "$reinject_recipient_restrictions"
                        ) -> list[str]:
    """The ``-o`` lines of a re-injection smtpd: no content filter and none of the checks
    the entry smtpd already made, XFORWARD trusted from loopback."""
    return [
        "  -o content_filter=",
        "  -o receive_override_options=no_unknown_recipient_checks,no_header_body_checks,"
        "no_milters",
        "  -o smtpd_helo_restrictions=",
        "  -o smtpd_client_restrictions=",
        "  -o smtpd_sender_restrictions=",
        "  -o smtpd_relay_restrictions=",
        f"  -o smtpd_recipient_restrictions={recipient_restrictions}",
        "  -o mynetworks=127.0.0.0/8",
        "  -o smtpd_authorized_xforward_hosts=127.0.0.0/8",
    ]


class SmtpdDaemon:
    """``dupfilter-smtpd`` as a process, as it runs in production; stderr goes to a file.

    The store is ``ROOT/NAME.db`` unless ``db`` is given; ``args`` are extra flags
    (``--connections 16``).
    """

    def __init__(self, root: Path, port: int, next_hop: int, config: str = "",
                 name: str = "dupfilter-smtpd", *, db: Path | str | None = None,
                 args: Sequence[str] = ()) -> None:
        self.root, self.port, self.next_hop, self.name = root, port, next_hop, name
        self.config = root / f"{name}.toml"
        self.config.write_text(config)      # empty: all defaults (tag everything)
        self.logfile = root / f"{name}.log"
        self.db = str(db) if db is not None else str(root / f"{name}.db")
        self.args = list(args)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.logfile, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "mailfilter.smtpd", "--config", str(self.config),
                 "--listen", f"127.0.0.1:{self.port}", "--next-hop",
                 f"127.0.0.1:{self.next_hop}", "--db", self.db, "--allow-root", *self.args],
                stdout=subprocess.DEVNULL, stderr=log,
                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        wait_for_port("127.0.0.1", self.port)

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(40)
        self.proc = None
        return code

    def log(self) -> str:
        return self.logfile.read_text(errors="replace")
