"""dupfilter-milter and an MTA that breaks the milter protocol (issue 14 item 8), over a raw
socket to the real daemon.

libmilter passes HELO and MAIL to the filter even before option negotiation, when
pymilter has made no object for the connection yet: pymilter's own callbacks then raised
AttributeError (a traceback in the log) and answered ``451 4.3.0 pymilter: untrapped
exception``.  Now the answer is a clean TEMPFAIL (``t``) and one warning line.  Other
commands out of order (RCPT, a header, the body, the end of a message before MAIL) libmilter
itself leaves unanswered and never hands to the filter; the daemon stays quiet and well.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest
from support.daemons import MilterDaemon
from support.milter_client import added_headers, final

OPTNEG = b"O" + struct.pack("!III", 6, 0x1FF, 0x1FFFFF)


def packet(command: bytes, data: bytes = b"") -> bytes:
    return struct.pack("!L", len(data) + 1) + command + data


def reply(sock: socket.socket, timeout: float = 5.0) -> tuple[bytes, bytes] | None:
    """The next reply (command, data); None if none came within ``timeout``."""
    sock.settimeout(timeout)
    try:
        head = sock.recv(4, socket.MSG_WAITALL)
    except TimeoutError:
        return None
    if len(head) < 4:
        return (b"", b"closed")
    size = struct.unpack("!L", head)[0]
    data = sock.recv(size, socket.MSG_WAITALL)
    return data[:1], data[1:]


@pytest.fixture
def daemon(tmp_path):
    with MilterDaemon(tmp_path, "") as running:
        yield running


def connect(d: MilterDaemon) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(d.address)
    return sock


@pytest.mark.parametrize("command, data, what", [
    (b"M", b"<ann@example.org>\0", "MAIL before option negotiation"),
    (b"H", b"client.example.org\0", "HELO before option negotiation"),
])
def test_command_before_negotiation_is_a_clean_tempfail(daemon: MilterDaemon, command: bytes,
                                                        data: bytes, what: str) -> None:
    for _ in range(3):
        with connect(daemon) as sock:
            sock.sendall(packet(command, data))
            assert reply(sock) == (b"t", b""), "not libmilter's SMFIR_TEMPFAIL"
    time.sleep(0.3)
    log = daemon.log_text()
    assert "Traceback" not in log and "untrapped" not in log, log
    warnings = [line for line in log.splitlines() if "milter protocol error" in line]
    assert warnings == [f"WARNING milter protocol error: {what} (the MTA does not follow the "
                        "milter protocol); answered tempfail"], log


def test_other_commands_out_of_order_are_dropped_quietly(daemon: MilterDaemon) -> None:
    with connect(daemon) as sock:
        for command, data in ((b"R", b"<bob@example.net>\0"), (b"L", b"From\0x\0"),
                              (b"B", b"body"), (b"E", b"")):
            sock.sendall(packet(command, data))
            assert reply(sock, timeout=1.0) is None
    with connect(daemon) as sock:          # negotiated, then the end of a message at once
        sock.sendall(packet(OPTNEG[:1], OPTNEG[1:]))
        assert reply(sock)[0] == b"O"
        sock.sendall(packet(b"E"))
        assert reply(sock, timeout=1.0) is None
    log = daemon.log_text()
    assert "Traceback" not in log and " action=" not in log, log   # nothing checked


def test_the_daemon_serves_mail_after_a_broken_mta(daemon: MilterDaemon) -> None:
    with connect(daemon) as sock:
        sock.sendall(packet(b"M", b"<ann@example.org>\0"))
        assert reply(sock) == (b"t", b"")
    with daemon.client() as client:
        replies = client.message("ann@example.org", ["bob@example.net"],
                                 [("From", "ann@example.org"), ("Subject", "after"),
                                  ("Message-ID", "<after@example.org>")],
                                 b"one two three four five six seven eight nine ten\r\n")
    assert final(replies)[0] == "a" and added_headers(replies) == [("X-Dupfilter", "unique")]
    assert "Traceback" not in daemon.log_text()


def test_end_of_message_without_mail_is_refused_by_the_session() -> None:
    """The session's own guard (libmilter keeps such an EOM from it, see above): a message
    with no MAIL is not checked or recorded, and the answer is TEMPFAIL."""
    import logging

    import Milter

    from mailfilter.config import load_settings
    from mailfilter.milter.session import DupfilterMilter, Runtime

    class Engines:
        def get(self) -> None:
            raise AssertionError("nothing may be checked")

    runtime = Runtime(load_settings(search=False), logging.getLogger("dupfilter.test"))
    runtime.engines = Engines()                 # type: ignore[assignment]
    DupfilterMilter.runtime = runtime
    session = DupfilterMilter()
    assert session.eom() == Milter.TEMPFAIL
    assert runtime.inflight == 0
