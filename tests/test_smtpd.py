"""dupfilter-smtpd against real peers on loopback: smtplib (and raw sockets) upstream, a
scriptable SMTP server as the next hop.  The Postfix loop is in test_smtpd_postfix.py."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import smtplib
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pytest
from doc_blocks import blocks
from helpers import make_message, paragraph_text
from support.daemons import FilterThread, SmtpdDaemon, parse_fields
from support.ports import free_port
from support.smtp_sink import SmtpSink
from test_decision import PARTIAL_ROWS, PartialRow

from mailfilter.config import ConfigError, Settings, load_settings
from mailfilter.engine import Engine
from mailfilter.names import SMTPD_ACTIONS
from mailfilter.smtpd.protocol import FilterSMTP
from mailfilter.smtpd.server import FilterServer
from mailfilter.store import StoreError

# What the next hop offers of XFORWARD (no PORT: only what it offers is passed on).
XFORWARD = "NAME ADDR PROTO HELO IDENT SOURCE"


def next_hop(**options: object) -> SmtpSink:
    """A scriptable next hop (see SmtpSink's failure knobs), started."""
    return SmtpSink(xforward=XFORWARD, **options).start()    # type: ignore[arg-type]


# ----------------------------------------------------------------------------- fixtures


class ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@dataclass
class Rig:
    next_hop: SmtpSink
    filter: FilterThread
    settings: Settings
    log: ListHandler

    @property
    def port(self) -> int:
        return self.filter.port

    def client(self) -> smtplib.SMTP:
        return smtplib.SMTP("127.0.0.1", self.port, local_hostname="client.test", timeout=30)

    def send(self, raw: bytes, sender: str = "ann@example.org",
             rcpts: tuple[str, ...] = ("bob@example.net",), **options: list[str]) -> dict:
        with self.client() as client:
            return client.sendmail(sender, list(rcpts), raw, **options)

    def verdict_lines(self, count: int = 1, timeout: float = 10.0) -> list[str]:
        """The per-message log lines, once there are ``count`` of them."""
        deadline = time.monotonic() + timeout
        while True:
            lines = [line for line in self.log.lines if " action=" in line]
            if len(lines) >= count or time.monotonic() > deadline:
                return lines
            time.sleep(0.01)


class FailingEngine:
    """An engine whose store has gone away: the message can be analysed, not checked."""

    def analyse(self, raw: bytes, **kwargs: object) -> bytes:
        return raw

    def process(self, *args: object, **kwargs: object) -> None:
        raise StoreError("the store is on fire")

    process_grouped = process_unrecorded = process

    def expect(self) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()


@pytest.fixture
def make_rig(tmp_path: Path) -> Iterator[Callable[..., Rig]]:
    """``make_rig(duplicate="discard", mode="proxy", engine=..., ...)`` → a running rig."""
    started: list[tuple[SmtpSink, FilterThread, Engine | None]] = []

    def make(*, engine: object | None = None, connections: int = 4, chunking: bool = False,
             rules: list[dict[str, str]] | None = None, **smtpd: object) -> Rig:
        stub = next_hop(chunking=chunking)
        settings = load_settings(search=False)
        settings.policy.rules = rules or []
        # Big messages go to an analysis worker: on a loaded machine its start alone can
        # pass the 2 s budget, which tests/test_budget.py tests; these tests are not about it.
        settings.analysis.deadline = 60.0
        settings.smtpd.listen = "127.0.0.1:0"
        settings.smtpd.next_hop = f"127.0.0.1:{stub.port}"
        for key, value in smtpd.items():
            if key in ("unique", "duplicate", "near_duplicate"):
                setattr(settings.smtpd.actions, key, value)
            else:
                setattr(settings.smtpd, key, value)
        own = None
        if engine is None:
            own = engine = Engine(settings, str(tmp_path / f"store{len(started)}"))
        log = ListHandler()
        logger = logging.getLogger(f"dupfilter.test.{id(log)}")
        logger.addHandler(log)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        controller = FilterThread(settings, engine, logger, connections=connections)
        controller.start()
        started.append((stub, controller, own))
        return Rig(stub, controller, settings, log)

    yield make
    for stub, controller, own in started:
        controller.stop(grace=5)
        stub.stop()
        if own is not None:
            own.close()


@pytest.fixture(params=["DATA", "BDAT"])
def rig(make_rig: Callable[..., Rig], request: pytest.FixtureRequest) -> Rig:
    """A running filter; its next hop offers CHUNKING (BDAT) or not (DATA)."""
    return make_rig(chunking=request.param == "BDAT")


def body(seed: int = 1) -> str:
    return paragraph_text(seed, 150)


def crlf(raw: bytes) -> bytes:
    return raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def read_reply(stream) -> tuple[int, str]:  # noqa: ANN001
    lines = []
    while True:
        line = stream.readline().decode("utf-8", "replace")
        assert line, "connection closed"
        lines.append(line[4:].rstrip("\r\n"))
        if line[3:4] != "-":
            return int(line[:3]), "\n".join(lines)


def header_values(data: bytes, name: str = "X-Dupfilter") -> list[str]:
    head = data.split(b"\r\n\r\n", 1)[0].decode("utf-8", "replace")
    return [line.split(":", 1)[1].strip() for line in head.split("\r\n")
            if line.lower().startswith(name.lower() + ":")]


# ----------------------------------------------------------------------------- basics


def test_tags_and_reinjects_with_the_original_envelope(rig: Rig) -> None:
    raw = crlf(make_message(body(), message_id="<env@example.org>"))
    refused = rig.send(raw, "ann@example.org", ("bob@example.net", "carol@example.net"),
                       mail_options=["BODY=8BITMIME"])
    assert refused == {}
    [got] = rig.next_hop.received(1)
    assert got.mail.startswith(b"MAIL FROM:<ann@example.org>")
    assert b" BODY=8BITMIME" in got.mail and re.search(rb" SIZE=\d+", got.mail)
    assert got.recipients == ("bob@example.net", "carol@example.net")
    assert header_values(got.data) == ["unique"]
    assert got.data == b"X-Dupfilter: unique\r\n" + raw
    [line] = rig.verdict_lines()
    assert "verdict=unique" in line and "action=tag" in line and "reply=250" in line
    assert "queued_as=Q1" in line and "recorded=yes" in line and "from=ann@example.org" in line


def test_the_log_line_has_the_documented_keys_in_order(rig: Rig) -> None:
    """docs/postfix.md's example line of dupfilter-smtpd (the Outcome's SMTPD_LINE)."""
    [example] = blocks("smtpd-log")
    raw = crlf(make_message(body(61), message_id="<keys@example.org>"))
    rig.send(raw)
    rig.send(raw)
    line = rig.verdict_lines(2)[1]
    assert list(parse_fields(line)) == list(parse_fields(example.text.split(" ", 1)[1]))


def test_second_copy_is_tagged_duplicate_and_the_incoming_header_replaced(rig: Rig) -> None:
    raw = crlf(make_message(body(2), message_id="<twice@example.org>",
                            headers={"X-Dupfilter": "unique; forged"}))
    rig.send(raw)
    rig.send(raw)
    first, second = rig.next_hop.received(2)
    assert header_values(first.data) == ["unique"]
    [value] = header_values(second.data)
    assert value.startswith("duplicate; score=1.00; reason=") and "seen=2" in value
    assert b"forged" not in second.data


def test_null_sender_and_quoted_local_part(rig: Rig) -> None:
    raw = crlf(make_message(body(3), message_id="<bounce@example.org>"))
    rig.send(raw, "", ('"john doe"@example.net',))
    [got] = rig.next_hop.received(1)
    assert got.mail.startswith(b"MAIL FROM:<>")
    assert got.recipients == ('"john doe"@example.net',)


# ----------------------------------------------------------------------------- protocol


def test_pipelining(rig: Rig) -> None:
    raw = crlf(make_message(body(4), message_id="<pipe@example.org>"))
    with socket.create_connection(("127.0.0.1", rig.port), timeout=30) as sock:
        stream = sock.makefile("rb")
        assert read_reply(stream)[0] == 220
        sock.sendall(b"EHLO client.test\r\n")
        code, text = read_reply(stream)
        assert code == 250 and "PIPELINING" in text and "SMTPUTF8" in text \
            and "8BITMIME" in text
        sock.sendall(b"MAIL FROM:<ann@example.org> BODY=8BITMIME\r\n"
                     b"RCPT TO:<bob@example.net>\r\nRCPT TO:<carol@example.net>\r\nDATA\r\n")
        assert [read_reply(stream)[0] for _ in range(4)] == [250, 250, 250, 354]
        sock.sendall(raw + b".\r\nMAIL FROM:<ann@example.org>\r\nRCPT TO:<dave@example.net>\r\n"
                     b"DATA\r\n")
        assert [read_reply(stream)[0] for _ in range(4)] == [250, 250, 250, 354]
        sock.sendall(raw + b".\r\nQUIT\r\n")
        assert [read_reply(stream)[0] for _ in range(2)] == [250, 221]
    first, second = rig.next_hop.received(2)
    assert first.recipients == ("bob@example.net", "carol@example.net")
    assert second.recipients == ("dave@example.net",)
    assert first.data.endswith(raw) and second.data.endswith(raw)
    # Two messages, and the next hop connection was reused for the second.
    assert first.connection == second.connection


def test_rset_drops_the_transaction_at_the_next_hop(rig: Rig) -> None:
    raw = crlf(make_message(body(5), message_id="<rset@example.org>"))
    with rig.client() as client:
        client.ehlo()
        assert client.mail("ann@example.org")[0] == 250
        assert client.rcpt("eve@example.net")[0] == 250
        assert client.rset()[0] == 250
        client.sendmail("ann@example.org", ["bob@example.net"], raw)
        # EHLO in the middle of a transaction also resets it.
        assert client.mail("ann@example.org")[0] == 250
        assert client.rcpt("mallory@example.net")[0] == 250
        client.ehlo()
    [got] = rig.next_hop.received(1)
    time.sleep(0.2)
    assert len(rig.next_hop.messages) == 1 and got.recipients == ("bob@example.net",)
    assert b"RSET\r\n" in rig.next_hop.commands


def test_many_recipients(rig: Rig) -> None:
    rcpts = tuple(f"user{i:03d}@example.net" for i in range(400))
    raw = crlf(make_message(body(6), message_id="<many@example.org>"))
    assert rig.send(raw, "ann@example.org", rcpts) == {}
    [got] = rig.next_hop.received(1)
    assert got.recipients == rcpts
    assert "rcpts=400" in rig.verdict_lines()[0]


@contextlib.contextmanager
def data_session(rig: Rig) -> Iterator[tuple[socket.socket, BinaryIO]]:
    """A raw SMTP session to the filter, greeted, at DATA (354) for ann → bob."""
    with socket.create_connection(("127.0.0.1", rig.port), timeout=30) as sock:
        stream = sock.makefile("rb")
        read_reply(stream)
        sock.sendall(b"EHLO client.test\r\nMAIL FROM:<ann@example.org>\r\n"
                     b"RCPT TO:<bob@example.net>\r\nDATA\r\n")
        assert [read_reply(stream)[0] for _ in range(4)] == [250, 250, 250, 354]
        yield sock, stream


def test_oversize_is_refused_with_552(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(max_message_bytes=4000)
    big = crlf(make_message(paragraph_text(7, 1500), message_id="<big@example.org>"))
    assert len(big) > 4000
    # SIZE declared (smtplib does it): refused at MAIL.
    with pytest.raises(smtplib.SMTPSenderRefused) as caught:
        rig.send(big)
    assert caught.value.smtp_code == 552 and caught.value.smtp_error.startswith(b"5.3.4")
    # No SIZE: refused at the end of DATA, and the session goes on.
    small = crlf(make_message(body(8), message_id="<small@example.org>"))
    with data_session(rig) as (sock, stream):
        sock.sendall(big + b".\r\n")
        code, text = read_reply(stream)
        assert (code, text[:5]) == (552, "5.3.4")
        sock.sendall(b"MAIL FROM:<ann@example.org>\r\nRCPT TO:<carol@example.net>\r\nDATA\r\n")
        assert [read_reply(stream)[0] for _ in range(3)] == [250, 250, 354]
        sock.sendall(small + b".\r\nQUIT\r\n")
        assert [read_reply(stream)[0] for _ in range(2)] == [250, 221]
    [got] = rig.next_hop.received(1)
    assert got.recipients == ("carol@example.net",) and got.data.endswith(small)
    assert any("reason=size" in line and "reply=552" in line for line in rig.log.lines)


def test_dot_stuffing(rig: Rig) -> None:
    text = "Subject: dots\r\nMessage-ID: <dots@example.org>\r\n\r\n.\r\n..\r\n.hidden\r\nend\r\n."
    raw = text.encode()
    rig.send(raw)
    [got] = rig.next_hop.received(1)
    assert got.data == b"X-Dupfilter: unique\r\n" + raw + b"\r\n"
    if got.bdat:    # BDAT: sent as is
        assert got.wire == got.data
    else:
        assert b"\r\n..\r\n...\r\n..hidden\r\nend\r\n..\r\n" in got.wire


def test_bare_lf_is_normalised_and_cannot_smuggle(rig: Rig) -> None:
    lf = make_message(body(9), message_id="<lf@example.org>")      # LF line ends
    rig.send(lf)        # smtplib adds a CRLF after the last bare LF
    [got] = rig.next_hop.received(1)
    assert got.data == b"X-Dupfilter: unique\r\n" + lf.replace(b"\n", b"\r\n") + b"\r\n"
    smuggle = (b"Subject: smuggle\nMessage-ID: <smuggle@example.org>\n\nbefore\n.\n"
               b"MAIL FROM:<evil@example.org>\nRCPT TO:<victim@example.net>\nDATA\n"
               b"smuggled\n.\r\n")
    with data_session(rig) as (sock, stream):
        sock.sendall(smuggle + b".\r\nQUIT\r\n")
        assert [read_reply(stream)[0] for _ in range(2)] == [250, 221]
    _, got = rig.next_hop.received(2)
    assert len(rig.next_hop.messages) == 2
    assert not any(b"evil" in m.mail for m in rig.next_hop.messages)
    assert b"\r\n.\r\nMAIL FROM:<evil@example.org>\r\n" in got.data
    assert b"\n" not in got.wire.replace(b"\r\n", b"")


DOTTED_BODY = (b"Leading dots, as Python's smtplib stuffs them after each LF:\n.hidden\n"
               b"..two\n.\n...\nend.\n.\n")


def dotted(message_id: str) -> bytes:
    """A message with bare-LF line ends and lines that start with dots."""
    return (f"From: ann@example.org\nSubject: dots\nMessage-ID: <{message_id}>\n\n"
            ).encode() + DOTTED_BODY


def test_bare_lf_lines_keep_their_dots(rig: Rig) -> None:
    """Issue 14 item 7: smtplib ends lines with bare LF and doubles every leading dot after
    each LF; aiosmtpd (and db08d02) removed the stuffed dot only after CRLF, so the next
    hop delivered "..hidden".  Now the body arrives as sent, with CRLF line ends."""
    raw = dotted("bare-lf-dots@example.org")
    rig.send(raw)       # smtplib adds a CRLF after the last bare LF: an empty last line
    [got] = rig.next_hop.received(1)
    assert got.data == b"X-Dupfilter: unique\r\n" + raw.replace(b"\n", b"\r\n") + b"\r\n"
    if not got.bdat:
        assert b"\r\n..hidden\r\n...two\r\n..\r\n....\r\nend.\r\n..\r\n" in got.wire


def test_crlf_clients_are_passed_byte_for_byte(rig: Rig) -> None:
    raw = dotted("crlf-dots@example.org").replace(b"\n", b"\r\n")
    rig.send(raw)                                   # smtplib: CRLF lines, dots stuffed
    with data_session(rig) as (sock, stream):       # a client that stuffs by hand
        sock.sendall(raw.replace(b"<crlf-dots@", b"<crlf-dots2@").replace(b"\r\n.", b"\r\n..")
                     + b".\r\n")
        assert read_reply(stream)[0] == 250
    first, second = rig.next_hop.received(2)
    assert first.data == b"X-Dupfilter: unique\r\n" + raw
    assert second.data.split(b"\r\n", 1)[1] == raw.replace(b"<crlf-dots@", b"<crlf-dots2@")


def test_a_single_dot_after_a_bare_lf_was_not_stuffed_and_stays(rig: Rig) -> None:
    """A client that ends lines with bare LF but does not stuff after them (only after
    CRLF): its single-dot lines arrive as sent; only ".." loses a dot."""
    body = b"Subject: unstuffed\nMessage-ID: <unstuffed@example.org>\n\nx\n.single\n.\nz"
    with data_session(rig) as (sock, stream):
        sock.sendall(body + b"\r\n.\r\n")
        assert read_reply(stream)[0] == 250
    [got] = rig.next_hop.received(1)
    assert got.data == b"X-Dupfilter: unique\r\n" + body.replace(b"\n", b"\r\n") + b"\r\n"


def test_8bit_and_smtputf8_pass_byte_for_byte(rig: Rig) -> None:
    utf8 = ("From: Jörg <jörg@bücher.example>\r\nTo: zoë@example.net\r\n"
            "Subject: Grüße aus Köln — 東京\r\nMessage-ID: <utf8@example.org>\r\n"
            "Content-Type: text/plain; charset=utf-8\r\n"
            "Content-Transfer-Encoding: 8bit\r\n\r\n"
            "Schöne Grüße, 日本語のテキスト.\r\n" + body(10).replace("\n", "\r\n")).encode()
    with rig.client() as client:
        client.ehlo()
        assert client.has_extn("smtputf8")
        client.sendmail("jörg@bücher.example", ["zoë@example.net"], utf8,
                        mail_options=["SMTPUTF8", "BODY=8BITMIME"])
    latin1 = ("Subject: caf\xe9\r\nMessage-ID: <latin1@example.org>\r\n"
              "Content-Type: text/plain; charset=iso-8859-1\r\n\r\n"
              "d\xe9j\xe0 vu, \xfcber alles\r\n").encode("latin-1")
    rig.send(latin1, mail_options=["BODY=8BITMIME"])
    first, second = rig.next_hop.received(2)
    assert "jörg@bücher.example".encode() in first.mail
    assert b" SMTPUTF8" in first.mail and b" BODY=8BITMIME" in first.mail
    assert first.recipients == ("zoë@example.net",)
    assert first.data == b"X-Dupfilter: unique\r\n" + utf8
    assert second.data == b"X-Dupfilter: unique\r\n" + latin1


def test_xforward_is_passed_on(rig: Rig) -> None:
    raw = crlf(make_message(body(11), message_id="<xf@example.org>"))
    with rig.client() as client:
        client.ehlo()
        assert "NAME" in client.esmtp_features["xforward"].upper()
        assert client.docmd("XFORWARD", "NAME=mx.example.com ADDR=192.0.2.7 PORT=4711")[0] \
            == 250
        assert client.docmd("XFORWARD", "IDENT=4Qx1Yz2AbC HELO=mx.example.com")[0] == 250
        assert client.docmd("XFORWARD", "COLOR=blue")[0] == 501
        client.sendmail("ann@example.org", ["bob@example.net"], raw)
        client.mail("ann@example.org")
        assert client.docmd("XFORWARD", "ADDR=192.0.2.8")[0] == 503
    [got] = rig.next_hop.received(1)
    sent = b" ".join(got.xforward)
    # The stub offers no PORT: only what it offers is passed on.
    assert b"ADDR=192.0.2.7" in sent and b"IDENT=4Qx1Yz2AbC" in sent and b"PORT" not in sent
    line = rig.verdict_lines()[0]
    assert "client=192.0.2.7" in line and "queue=4Qx1Yz2AbC" in line


def test_big_message_with_long_lines(rig: Rig) -> None:
    line = ("x" * 4999 + "\r\n").encode()
    raw = (b"Subject: big\r\nMessage-ID: <big@example.org>\r\n\r\n"
           + b"".join(b".%d " % i + line for i in range(600)))
    assert len(raw) > 3_000_000
    rig.send(raw)
    [got] = rig.next_hop.received(1, timeout=30)
    assert got.data == b"X-Dupfilter: unique\r\n" + raw


def test_concurrent_sessions_share_a_small_pool(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(connections=2)
    errors: list[BaseException] = []

    def client(number: int) -> None:
        try:
            with rig.client() as smtp:
                for seed in range(5):
                    raw = crlf(make_message(body(1000 + number * 10 + seed),
                                            message_id=f"<c{number}-{seed}@example.org>"))
                    smtp.sendmail("ann@example.org", [f"u{number}@example.net"], raw)
        except BaseException as error:  # pragma: no cover - reported below
            errors.append(error)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert len(rig.next_hop.received(60)) == 60
    # Never more than two connections to the next hop at once, kept open and reused.
    assert rig.next_hop.connections <= 2


def test_allow_rule_sees_the_envelope_sender(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(rules=[{"name": "cron", "field": "envelope-sender", "pattern": "^cron@",
                           "action": "skip"}])
    raw = crlf(make_message(body(28), message_id="<cron@example.org>"))
    rig.send(raw, "cron@example.org")
    rig.send(raw, "cron@example.org")
    rig.send(raw, "ann@example.org")
    messages = rig.next_hop.received(3)
    assert [header_values(m.data) for m in messages] == [
        ["unique; skipped=cron"], ["unique; skipped=cron"], ["unique"]]
    assert ["recorded=no" in line for line in rig.verdict_lines(3)] == [True, True, False]


class Capture:
    """An aiosmtpd handler that keeps what DATA produced."""

    def __init__(self) -> None:
        self.contents: list[bytes] = []

    async def handle_DATA(self, server: object, session: object, envelope: object) -> str:
        self.contents.append(envelope.original_content)  # type: ignore[attr-defined]
        return "250 OK"


def data_streams() -> list[bytes]:
    """DATA payloads (without the final dot line) that exercise line ends and dots."""
    fixed = [b"", b"a\r\n", b"Regards.\r\n", b"..\r\n", b"a\n.\nb\r\n",
             b"a\r\n..b\r\n...\r\n", b"x.\r\n\r\n", b"a\r\r\n", b".a\r\n", b".\r\n..\r\n",
             b"end.\r\n..\r\n", b"y" * 5000 + b"\r\n", b"no final newline",
             b"\r\n\r\n", b"a\r\n.\n", b"a\r.\r\n"]
    import random
    rng = random.Random(5)
    pieces = [b"a", b"b.", b".", b"..", b"\r\n", b"\n", b"\r", b" "]
    for _ in range(300):
        body = b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 30)))
        fixed.append(body)
    streams = []
    for body in fixed:
        stream = body + (b"\r\n" if body and not body.endswith(b"\r\n") else b"") + b".\r\n"
        # Keep payloads whose first end-of-data is the one we append.
        if not (stream.startswith(b".\r\n") and body) and b"\r\n.\r\n" not in stream[:-3]:
            streams.append(stream)
    return streams


def capture_data(make_protocol: Callable[[Capture], object], streams: list[bytes]
                 ) -> list[bytes]:
    from aiosmtpd.controller import Controller

    class Control(Controller):
        def factory(self) -> object:
            return make_protocol(self.handler)

    capture = Capture()
    port = free_port()
    control = Control(capture, hostname="127.0.0.1", port=port)
    control.start()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            stream = sock.makefile("rb")
            read_reply(stream)
            sock.sendall(b"EHLO client.test\r\n")
            read_reply(stream)
            for payload in streams:
                sock.sendall(b"MAIL FROM:<a@example.org>\r\nRCPT TO:<b@example.net>\r\n"
                             b"DATA\r\n")
                assert [read_reply(stream)[0] for _ in range(3)] == [250, 250, 354]
                sock.sendall(payload)
                assert read_reply(stream)[0] == 250, payload
    finally:
        control.stop()
    return capture.contents


def test_data_reading_matches_aiosmtpd() -> None:
    from types import SimpleNamespace

    from aiosmtpd.smtp import SMTP

    class Stock(SMTP):
        line_length_limit = 1 << 20

    streams = data_streams()
    assert len(streams) > 200
    stock = capture_data(lambda handler: Stock(handler, hostname="stock"), streams)
    server = SimpleNamespace(sessions=set(), logger=logging.getLogger("dupfilter.test"))
    ours = capture_data(lambda handler: FilterSMTP(handler, server, hostname="ours"),
                        streams)
    assert len(ours) == len(stock) == len(streams)
    for stream, expected, got in zip(streams, stock, ours, strict=True):
        # One difference, on purpose: after a bare LF, ".." loses a dot (stock aiosmtpd
        # reads CRLF lines only and keeps it; see FilterSMTP.smtp_DATA).
        assert got == re.sub(rb"(?<=\n)(?<!\r\n)\.(?=\.)", b"", expected), stream


def test_address_parsing_matches_aiosmtpd() -> None:
    from types import SimpleNamespace

    from aiosmtpd.smtp import SMTP

    server = SimpleNamespace(sessions=set(), logger=logging.getLogger("dupfilter.test"))
    ours = FilterSMTP(Capture(), server, hostname="ours")     # type: ignore[arg-type]
    stock = SMTP(Capture(), hostname="stock")
    for arg in ["<a@b>", "<a@b> SIZE=12 BODY=8BITMIME", "<>", "<> SIZE=5", "a@b",
                '<"john doe"@example.net>', "<@r1,@r2:u@x>", "<u@[192.0.2.1]>",
                "<jörg@bücher.example> SMTPUTF8", "<a.b+c=d/e!f#g$h%i&j'k*l^m_n`o{p|q}r~s@x.y>",
                "<a@b>\tSIZE=1", "<a@b>  ", "<a@@b>", "<a@b", "<a b@c>", "<a@b>x",
                "<a(comment)@b>", "<a@b,c@d>", "<a@b.>", "< a@b >", "<user@localhost>",
                "<.a@b>", "<a..b@c>", "<a.@b>", "<a@.b>", "<a@b..c>", "<a@b> ", "<a\x7f@b>"]:
        assert ours._getaddr(arg) == stock._getaddr(arg), arg


# ----------------------------------------------------------------------------- next hop


def test_next_hop_down_is_a_451(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig()
    rig.next_hop.stop()
    raw = crlf(make_message(body(12), message_id="<down@example.org>"))
    with pytest.raises(smtplib.SMTPRecipientsRefused) as caught:
        rig.send(raw, rcpts=("bob@example.net", "carol@example.net"))
    for code, text in caught.value.recipients.values():
        assert code == 451 and text.startswith(b"4.3.0")


def test_next_hop_refusals_are_passed_back_per_recipient(rig: Rig) -> None:
    rig.next_hop.rcpt_replies = {"nobody@example.net": "550 5.1.1 <nobody@example.net>: unknown",
                             "full@example.net": "452 4.2.2 mailbox full"}
    raw = crlf(make_message(body(13), message_id="<partly@example.org>"))
    refused = rig.send(raw, rcpts=("bob@example.net", "nobody@example.net",
                                   "full@example.net"))
    assert {k: v[0] for k, v in refused.items()} == {"nobody@example.net": 550,
                                                      "full@example.net": 452}
    assert refused["nobody@example.net"][1] == b"5.1.1 <nobody@example.net>: unknown"
    [got] = rig.next_hop.received(1)
    assert got.recipients == ("bob@example.net",)
    assert "rcpts=1" in rig.verdict_lines()[0]


def test_next_hop_mail_refusal_reaches_every_recipient(rig: Rig) -> None:
    rig.next_hop.mail_reply = "553 5.1.8 sender domain does not exist"
    raw = crlf(make_message(body(14), message_id="<nosender@example.org>"))
    with pytest.raises(smtplib.SMTPRecipientsRefused) as caught:
        rig.send(raw, rcpts=("bob@example.net", "carol@example.net"))
    assert {v for v in caught.value.recipients.values()} == {
        (553, b"5.1.8 sender domain does not exist")}


@pytest.mark.parametrize("reply", ["554 5.7.0 content refused", "452 4.3.1 queue full"])
def test_next_hop_end_of_data_reply_is_passed_back_and_not_recorded(
        rig: Rig, reply: str) -> None:
    rig.next_hop.data_reply = reply
    raw = crlf(make_message(body(15), message_id="<refused@example.org>"))
    with pytest.raises(smtplib.SMTPDataError) as caught:
        rig.send(raw)
    assert caught.value.smtp_code == int(reply[:3])
    assert caught.value.smtp_error == reply[4:].encode()
    rig.next_hop.data_reply = None
    rig.send(raw)
    [got] = rig.next_hop.received(1)
    # The refused copy was not remembered: this one is still new.
    assert header_values(got.data) == ["unique"]
    assert "recorded=no" in rig.verdict_lines()[0]


def test_connection_lost_after_the_dot_is_a_451(rig: Rig) -> None:
    rig.next_hop.close_after_dot = 1
    raw = crlf(make_message(body(16), message_id="<lost@example.org>"))
    with pytest.raises(smtplib.SMTPDataError) as caught:
        rig.send(raw)
    assert caught.value.smtp_code == 451
    assert "maybe_delivered=yes" in rig.verdict_lines()[0]
    rig.send(raw)               # the retry goes through on a new connection
    assert len(rig.next_hop.received(1)) == 1


def test_next_hop_gone_before_the_message_is_replayed(rig: Rig) -> None:
    rig.next_hop.close_after_rcpt = 1
    raw = crlf(make_message(body(17), message_id="<replay@example.org>"))
    rig.send(raw, rcpts=("bob@example.net",))
    [got] = rig.next_hop.received(1)
    assert got.recipients == ("bob@example.net",)
    assert rig.next_hop.connections == 2


def test_next_hop_lost_at_the_data_command(rig: Rig) -> None:
    rig.next_hop.close_at_data = 1
    raw = crlf(make_message(body(27), message_id="<atdata@example.org>"))
    if rig.next_hop.chunking:
        # BDAT carries the message: it may have arrived, so the upstream retries later.
        with pytest.raises(smtplib.SMTPDataError) as caught:
            rig.send(raw, rcpts=("bob@example.net", "carol@example.net"))
        assert caught.value.smtp_code == 451
        assert "maybe_delivered=yes" in rig.verdict_lines()[0]
        return
    # DATA got no 354: nothing went out, so the transaction is replayed at once.
    rig.send(raw, rcpts=("bob@example.net", "carol@example.net"))
    [got] = rig.next_hop.received(1)
    assert got.recipients == ("bob@example.net", "carol@example.net")
    assert rig.next_hop.connections == 2


def test_stale_kept_open_connection_is_replaced(rig: Rig) -> None:
    rig.next_hop.stale_after_message = True
    for seed in (18, 19, 20):
        rig.send(crlf(make_message(body(seed), message_id=f"<stale{seed}@example.org>")))
    assert len(rig.next_hop.received(3)) == 3
    assert rig.next_hop.connections == 3


# ----------------------------------------------------------------------------- actions


def test_discard(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(duplicate="discard", near_duplicate="discard")
    raw = crlf(make_message(body(21), message_id="<discard@example.org>"))
    for _ in range(3):
        assert rig.send(raw) == {}
    time.sleep(0.2)
    assert len(rig.next_hop.messages) == 1
    lines = rig.verdict_lines(3)
    assert ["action=discard" in line for line in lines] == [False, True, True]
    # A discarded copy is not recorded: the third one still counts seen=2.
    assert "seen=2" in lines[2]


def test_discard_drops_only_recipients_who_had_it(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(duplicate="discard")
    raw = crlf(make_message(body(22), message_id="<scope@example.org>"))
    rig.send(raw, rcpts=("bob@example.net",))
    rig.send(raw, rcpts=("Bob@example.net", "carol@example.net"))
    first, second = rig.next_hop.received(2)
    assert second.recipients == ("carol@example.net",)
    assert header_values(second.data) == ["unique"]
    assert "dropped=1" in rig.verdict_lines(2)[1]
    # Now both had it: the whole message is discarded.
    rig.send(raw, rcpts=("bob@example.net", "carol@example.net"))
    time.sleep(0.2)
    assert len(rig.next_hop.messages) == 2


@pytest.mark.parametrize("row", [row for row in PARTIAL_ROWS
                                 if {row.duplicate, row.unique} <= set(SMTPD_ACTIONS)],
                         ids=lambda row: row.id)
def test_partial_duplicate_table(make_rig: Callable[..., Rig], row: PartialRow) -> None:
    """The planner's partial-duplicate rows through dupfilter-smtpd (bob had it, carol
    not); before the queue, so that reject is allowed."""
    rig = make_rig(mode="proxy", duplicate=row.duplicate)
    raw = crlf(make_message(body(60), message_id="<table@example.org>"))
    rig.send(raw, rcpts=("bob@example.net",))       # recorded under unique = "tag"
    rig.next_hop.received(1)
    rig.settings.smtpd.actions.unique = row.unique
    if row.reply == 250:
        assert rig.send(raw, rcpts=("bob@example.net", "carol@example.net")) == {}
    else:
        with pytest.raises(smtplib.SMTPDataError) as caught:
            rig.send(raw, rcpts=("bob@example.net", "carol@example.net"))
        assert caught.value.smtp_code == row.reply
    fields = parse_fields(rig.verdict_lines(2)[1].split(" ", 1)[-1])
    assert (fields["action"], fields.get("note")) == (row.action, row.note)
    if not row.carol:
        time.sleep(0.2)
        assert len(rig.next_hop.messages) == 1
        return
    _, got = rig.next_hop.received(2)
    assert got.recipients == (("bob@example.net",) if row.bob else ()) + ("carol@example.net",)
    assert [v.split(";")[0] for v in header_values(got.data)] == (
        [row.header] if row.header else [])


def test_reject_in_proxy_mode(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(mode="proxy", duplicate="reject", reject_message="Seen that already")
    raw = crlf(make_message(body(23), message_id="<reject@example.org>"))
    rig.send(raw, rcpts=("bob@example.net",))
    with pytest.raises(smtplib.SMTPDataError) as caught:
        rig.send(raw, rcpts=("bob@example.net",))
    assert (caught.value.smtp_code, caught.value.smtp_error) == (
        550, b"5.7.1 Seen that already")
    # Only bob had it: carol must get it, so it is tagged instead, as a partial duplicate
    # (a "duplicate" header would have the recipes file carol's first copy away).
    rig.send(raw, rcpts=("bob@example.net", "carol@example.net"))
    first, second = rig.next_hop.received(2)
    assert second.recipients == ("bob@example.net", "carol@example.net")
    assert header_values(second.data)[0].startswith("partial; rcpts_seen=1/2; verdict=duplicate")


def test_reject_is_refused_in_after_queue_mode(settings: Settings, tmp_path: Path) -> None:
    settings.smtpd.actions.duplicate = "reject"
    with Engine(settings, str(tmp_path / "store")) as engine, \
            pytest.raises(ConfigError, match="needs smtpd.mode"):
        FilterServer(settings, engine, logging.getLogger("test"))


def forged(seed: int, message_id: str) -> tuple[bytes, bytes]:
    """A message with forged X-Dupfilter fields (one folded), and the same without them.
    The body's own "X-Dupfilter: duplicate" line is not a header and stays."""
    text = body(seed) + "\nX-Dupfilter: duplicate (quoted in the body)\n"
    raw = crlf(make_message(text, message_id=message_id, headers={
        "X-Dupfilter": "duplicate; forged\n\tcontinued", "X-Other": "kept",
        "X-DUPFILTER": "near-duplicate"}))
    return raw, crlf(make_message(text, message_id=message_id, headers={"X-Other": "kept"}))


def test_accept_passes_untagged(make_rig: Callable[..., Rig]) -> None:
    """No header of ours, and none from outside: a forged "duplicate" would be filed away."""
    rig = make_rig(unique="accept")
    raw, clean = forged(24, "<accept@example.org>")
    rig.send(raw)
    plain = crlf(make_message(body(26), message_id="<plain@example.org>"))
    rig.send(plain)
    got, untouched = rig.next_hop.received(2)
    assert got.data == clean and header_values(got.data) == []
    assert untouched.data == plain         # nothing to remove: byte for byte
    assert "action=accept" in rig.verdict_lines()[0]


def test_discard_of_seen_recipients_under_accept_removes_a_forged_header(
        make_rig: Callable[..., Rig]) -> None:
    """Only bob had it: carol's copy goes on under the unique action (accept), unlabelled."""
    rig = make_rig(unique="accept", duplicate="discard")
    raw, clean = forged(27, "<partial@example.org>")
    rig.send(raw, rcpts=("bob@example.net",))
    rig.send(raw, rcpts=("bob@example.net", "carol@example.net"))
    first, second = rig.next_hop.received(2)
    assert second.recipients == ("carol@example.net",)
    assert first.data == clean and second.data == clean
    assert "note=discard-seen-recipients" in rig.verdict_lines(2)[1]


def test_removing_the_header_failing_passes_the_message_unchanged(
        make_rig: Callable[..., Rig], monkeypatch: pytest.MonkeyPatch) -> None:
    """If the removal itself fails, the message still goes on (as it came), and a warning
    says why."""
    import mailfilter.headers

    def broken(raw: bytes) -> bytes:
        raise MemoryError("no room to rebuild the header")

    monkeypatch.setattr(mailfilter.headers, "remove_ours", broken)
    rig = make_rig(engine=FailingEngine())
    raw, _ = forged(28, "<unremovable@example.org>")
    assert rig.send(raw) == {}
    [got] = rig.next_hop.received(1)
    assert got.data == raw
    assert any("cannot remove an incoming X-Dupfilter header (MemoryError" in line
               for line in rig.log.lines)
    assert "verdict=error" in rig.verdict_lines()[0]


@pytest.mark.parametrize("on_error", ["accept", "tempfail"])
def test_internal_error_follows_on_error(make_rig: Callable[..., Rig], on_error: str) -> None:
    rig = make_rig(engine=FailingEngine(), on_error=on_error, duplicate="discard")
    raw = crlf(make_message(body(25), message_id="<error@example.org>"))
    if on_error == "accept":
        rig.send(raw)
        [got] = rig.next_hop.received(1)
        assert got.data == raw
    else:
        with pytest.raises(smtplib.SMTPDataError) as caught:
            rig.send(raw)
        assert caught.value.smtp_code == 451
        time.sleep(0.2)
        assert rig.next_hop.messages == []
    [line] = rig.verdict_lines()
    assert "verdict=error" in line and "StoreError" in line


def test_on_error_accept_removes_a_forged_header(make_rig: Callable[..., Rig]) -> None:
    """Unchecked is not unfiltered: while the store is down, a forged "X-Dupfilter:
    duplicate" must not get the message filed away downstream."""
    rig = make_rig(engine=FailingEngine(), on_error="accept")
    raw, clean = forged(29, "<error-forged@example.org>")
    assert rig.send(raw) == {}
    [got] = rig.next_hop.received(1)
    assert got.data == clean and header_values(got.data) == []
    [line] = rig.verdict_lines()
    assert "verdict=error" in line and "action=accept" in line and "reply=250" in line


class FatalEngine:
    """An engine that fails with an exception that is not an Exception (SystemExit from a
    library, say)."""

    def analyse(self, *args: object, **kwargs: object) -> None:
        raise SystemExit("a library gave up")

    # The handler analyses in its AnalysisPool, then hands the analysis to the engine.
    process = process_grouped = process_known = process_unrecorded = expect = analyse


def test_non_exception_error_follows_on_error_and_frees_the_connection(
        make_rig: Callable[..., Rig]) -> None:
    """Not an Exception subclass: still on_error (here accept), the session answers, and
    the one next-hop connection is given back (the second message needs it)."""
    rig = make_rig(engine=FatalEngine(), connections=1, timeout=10)
    for n in (1, 2):
        raw = crlf(make_message(body(30 + n), message_id=f"<fatal{n}@example.org>"))
        with smtplib.SMTP("127.0.0.1", rig.port, local_hostname="client.test",
                          timeout=15) as client:
            assert client.sendmail("ann@example.org", ["bob@example.net"], raw) == {}
        assert rig.next_hop.received(n)[-1].data == raw
    lines = rig.verdict_lines(2)
    assert len(lines) == 2 and all("SystemExit" in line for line in lines)


def test_a_failing_log_line_does_not_turn_a_delivery_into_a_451(
        make_rig: Callable[..., Rig]) -> None:
    """The next hop took the message: a log (or metrics) failure must not answer 451, or
    the upstream sends it again."""
    rig = make_rig()

    class Broken(logging.Filter):
        def filter(self, record: logging.LogRecord) -> bool:
            raise OSError("log device gone")

    logger = logging.getLogger(f"dupfilter.test.{id(rig.log)}")
    logger.addFilter(Broken())
    raw = crlf(make_message(body(40), message_id="<logfail@example.org>"))
    assert rig.send(raw) == {}
    assert len(rig.next_hop.received(1)) == 1


# ----------------------------------------------------------------------------- the daemon


@pytest.fixture
def stub() -> Iterator[SmtpSink]:
    started = next_hop()
    yield started
    started.stop()


def smtpd_daemon(tmp_path: Path, stub: SmtpSink, *args: str, config: str = "",
                 env: dict[str, str] | None = None) -> SmtpdDaemon:
    return SmtpdDaemon(tmp_path, free_port(), stub.port, config, db=tmp_path / "db",
                       args=args, env=env)


def test_daemon_tags_and_drains_in_flight_mail_on_sigterm(tmp_path: Path,
                                                          stub: SmtpSink) -> None:
    daemon = smtpd_daemon(tmp_path, stub, "--allow-root").start()
    proc, port = daemon.proc, daemon.port
    assert proc is not None
    try:
        stub.data_delay = 1.0
        raw = crlf(make_message(body(26), message_id="<term@example.org>"))
        result: dict[str, object] = {}

        def send() -> None:
            client = smtplib.SMTP("127.0.0.1", port, timeout=30)
            try:
                result["refused"] = client.sendmail("ann@example.org",
                                                    ["bob@example.net"], raw)
                # Once the transaction is over the draining server may say 421 before
                # the client's QUIT arrives (a loaded machine): that is the expected end.
                try:
                    result["quit"] = client.docmd("QUIT")[0]
                except (smtplib.SMTPServerDisconnected, OSError):
                    result["quit"] = 421        # the 421 and the close came first
            except Exception as error:  # pragma: no cover - reported below
                result["error"] = error
            finally:
                client.close()

        sender = threading.Thread(target=send)
        sender.start()
        assert stub.started_data.wait(10)
        proc.send_signal(signal.SIGTERM)
        sender.join(15)
        assert result.get("refused") == {} and "error" not in result, result
        assert result["quit"] in (221, 421), result
        assert proc.wait(15) == 0
        # Not listening any more.
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
    finally:
        daemon.kill()
    stderr = daemon.log_text()
    [got] = stub.messages
    assert header_values(got.data) == ["unique"]
    assert "listening on" in stderr and "verdict=unique" in stderr and "stopped" in stderr
    assert "Traceback" not in stderr


def test_daemon_without_its_store_runs_on_error_and_opens_it_later(
        tmp_path: Path, stub: SmtpSink) -> None:
    """A store that cannot be opened at start (here a file is where its folder should be)
    is one log line, not an exit and a systemd restart loop: mail goes on by on_error
    (accept: untagged, a forged header removed), and once the store can be opened the
    same process checks again."""
    (tmp_path / "db").write_text("not a folder")
    daemon = smtpd_daemon(tmp_path, stub, "--allow-root", "--store-retry", "0.5").start()
    proc, port = daemon.proc, daemon.port
    assert proc is not None
    try:
        raw = crlf(make_message(body(27), message_id="<nostore@example.org>"))
        with smtplib.SMTP("127.0.0.1", port, timeout=30) as client:
            assert client.sendmail("ann@example.org", ["bob@example.net"],
                                   b"X-Dupfilter: duplicate; forged\r\n" + raw) == {}
        (tmp_path / "db").unlink()
        time.sleep(0.7)
        with smtplib.SMTP("127.0.0.1", port, timeout=30) as client:
            assert client.sendmail("ann@example.org", ["bob@example.net"], raw) == {}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    finally:
        daemon.kill()
    stderr = daemon.log_text()
    first, second = stub.messages
    assert header_values(first.data) == []                 # passed on by on_error=accept
    assert header_values(second.data) == ["unique"]        # checked: the store is open now
    assert stderr.count("cannot open the store") == 1, stderr
    assert "on_error=accept" in stderr and "store opened" in stderr
    assert "Traceback" not in stderr


def test_daemon_refuses_root_without_allow_root(tmp_path: Path, stub: SmtpSink) -> None:
    assert os.geteuid() == 0, "this test runs as root (CI does): it checks refusing root"
    done = subprocess.run(smtpd_daemon(tmp_path, stub).command(), capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 2
    assert "refusing to run as root" in done.stderr


@pytest.mark.parametrize("config, message", [
    ("[smtpd.actions]\nduplicate = \"reject\"\n", "needs smtpd.mode"),
    ("[smtpd]\nmode = \"sideways\"\n", "smtpd.mode"),
    ("[smtpd]\nlisten = \"nowhere\"\n", None),
])
def test_daemon_reports_bad_settings(tmp_path: Path, stub: SmtpSink, config: str,
                                     message: str | None) -> None:
    conf = tmp_path / "bad.toml"
    conf.write_text(config)
    done = subprocess.run(
        [sys.executable, "-m", "mailfilter.smtpd", "--config", str(conf), "--next-hop",
         f"127.0.0.1:{stub.port}", "--allow-root", "--db", str(tmp_path / "db")]
        + ([] if message is None else ["--listen", "127.0.0.1:1"]),
        capture_output=True, text=True, timeout=30)
    assert done.returncode == 2
    assert done.stderr.startswith("dupfilter-smtpd: ")
    assert (message or "is not HOST:PORT") in done.stderr
    assert "Traceback" not in done.stderr


def test_slow_client_times_out(make_rig: Callable[..., Rig]) -> None:
    rig = make_rig(timeout=1.0)
    with socket.create_connection(("127.0.0.1", rig.port), timeout=30) as sock:
        stream = sock.makefile("rb")
        assert read_reply(stream)[0] == 220
        started = time.monotonic()
        sock.sendall(b"EHLO slow.test\r\n")
        read_reply(stream)
        # Nothing more is sent: the server hangs up after its timeout.
        assert stream.read() == b""
        assert time.monotonic() - started < 10


def test_overlong_command_is_refused_and_the_session_goes_on(rig: Rig) -> None:
    with socket.create_connection(("127.0.0.1", rig.port), timeout=30) as sock:
        stream = sock.makefile("rb")
        read_reply(stream)
        sock.sendall(b"MAIL FROM:<" + b"a" * 4000 + b"@example.org>\r\n")
        assert read_reply(stream)[0] == 500
        sock.sendall(b"NOOP\r\n")
        assert read_reply(stream)[0] == 250


def test_daemon_notifies_systemd_and_reloads_on_sighup(tmp_path: Path,
                                                       stub: SmtpSink) -> None:
    """Type=notify readiness, and SIGHUP applying new actions without a restart."""
    notify_path = tmp_path / "notify.sock"
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(notify_path))
    notify.settimeout(20)
    daemon = smtpd_daemon(tmp_path, stub, "--allow-root",
                          env={"NOTIFY_SOCKET": str(notify_path)}).start()
    proc, port = daemon.proc, daemon.port
    assert proc is not None
    try:
        assert b"READY=1" in notify.recv(4096)
        raw = crlf(make_message(body(27), message_id="<hup1@example.org>"))
        with smtplib.SMTP("127.0.0.1", port, timeout=30) as client:
            client.sendmail("ann@example.org", ["bob@example.net"], raw)
        daemon.config.write_text('[smtpd.actions]\nduplicate = "discard"\n')
        proc.send_signal(signal.SIGHUP)
        assert b"RELOADING=1" in notify.recv(4096)
        assert b"READY=1" in notify.recv(4096)
        again = crlf(make_message(body(27), message_id="<hup2@example.org>"))
        with smtplib.SMTP("127.0.0.1", port, timeout=30) as client:   # same connection pool
            assert client.sendmail("ann@example.org", ["bob@example.net"], again) == {}
        proc.send_signal(signal.SIGTERM)
        assert b"STOPPING=1" in notify.recv(4096)
        assert proc.wait(15) == 0
    finally:
        notify.close()
        daemon.kill()
    assert len(stub.messages) == 1                  # the duplicate was discarded after HUP
    assert "reloaded" in daemon.log_text()


def test_daemon_counts_each_decision_with_its_record(tmp_path: Path, stub: SmtpSink) -> None:
    """dupfilter-smtpd counts a message's decision (``dupfilter-db stats``) in the
    message's own write transaction: 10 messages one at a time are 10 commits.  Before,
    each count was a write transaction of its own after the message's: 20 commits, a
    second wait for the disk and more CPU per message."""
    import json

    import lmdb
    from support.cli import DUPFILTER_DB, run

    daemon = smtpd_daemon(tmp_path, stub, "--allow-root").start()
    try:
        def send(number: int) -> None:
            raw = crlf(make_message(body(300 + number), message_id=f"<n{number}@example.org>"))
            with smtplib.SMTP("127.0.0.1", daemon.port, timeout=30) as client:
                client.sendmail("ann@example.org", ["bob@example.net"], raw)

        send(0)
        time.sleep(0.3)                     # the first message's writes are all done

        def last_txnid() -> int:
            with lmdb.open(daemon.db, readonly=True, lock=True, max_dbs=64) as env:
                return env.info()["last_txnid"]

        before = last_txnid()
        for number in range(1, 11):
            send(number)
        assert stub.wait(11)
        time.sleep(0.3)
        assert last_txnid() - before <= 11  # 20 when each count had a commit of its own
        assert daemon.stop() == 0
    finally:
        daemon.kill()
    stats = json.loads(run(DUPFILTER_DB, "--db", daemon.db, "stats", "--json").stdout)
    (day,) = stats["decisions_per_day"].values()
    assert day == {"tag": 11}
