"""dupfilter-smtpd in a real Postfix, after the queue and as a before-queue proxy.

    after-queue:  client ─► smtpd :entry (content_filter=scan:[127.0.0.1]:F)
                  ─► scan (smtp) ─► dupfilter-smtpd :F ─► smtpd :R (re-injection) ─► sink
    proxy:        client ─► smtpd :P (smtpd_proxy_filter=127.0.0.1:F2)
                  ─► dupfilter-smtpd :F2 (mode proxy) ─► smtpd :R ─► sink

Everything is started here: a private Postfix (tests/support/postfix.py) and the
``dupfilter-smtpd`` daemon as its own process, as it runs in production.
"""

from __future__ import annotations

import re
import shutil
import smtplib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import make_message, paragraph_text
from support.daemons import SmtpdDaemon
from support.ports import free_port, wait_for_port
from support.postfix import PostfixHarness, filter_master_cf

Loop = tuple[PostfixHarness, SmtpdDaemon, SmtpdDaemon, int]


@pytest.fixture(scope="module")
def loop() -> Iterator[Loop]:
    # Postfix's unprivileged processes must reach the folder: pytest's tmp_path sits under
    # 0700 folders, so the instance lives in its own folder under /tmp.
    root = Path(tempfile.mkdtemp(prefix="dupfilter-smtpd-loop-"))
    root.chmod(0o755)
    filter_port, reinject_port, proxy_port, proxy_filter_port = (free_port()
                                                                 for _ in range(4))
    harness = PostfixHarness(
        root / "postfix",
        main_cf=["reinject_recipient_restrictions = check_recipient_access "
                 "inline:{ refused@sink.test=REJECT }, permit_mynetworks, reject"],
        master_cf=filter_master_cf(filter_port, reinject_port, proxy_port,
                                   proxy_filter_port),
        smtpd_options=[f"content_filter=scan:[127.0.0.1]:{filter_port}",
                       "receive_override_options=no_address_mappings"])
    daemon = SmtpdDaemon(root, filter_port, reinject_port)
    proxy = SmtpdDaemon(root, proxy_filter_port, reinject_port, name="proxy",
                        config='[smtpd]\nmode = "proxy"\nreject_message = "Duplicate, not '
                               'accepted again"\n[smtpd.actions]\nduplicate = "reject"\n')
    daemon.start()
    proxy.start()
    try:
        harness.start()
        wait_for_port("127.0.0.1", reinject_port)
        wait_for_port("127.0.0.1", proxy_port)
        yield harness, daemon, proxy, proxy_port
    finally:
        harness.stop()
        logs = ""
        for each in (daemon, proxy):
            if each.proc is not None:
                assert each.stop() == 0
            logs += each.log_text()
        shutil.rmtree(root, ignore_errors=True)
        assert "Traceback" not in logs, logs


def message(seed: int, **kwargs: object) -> bytes:
    raw = make_message(paragraph_text(seed, 160), **kwargs)  # type: ignore[arg-type]
    return raw.replace(b"\n", b"\r\n")


def test_second_copy_arrives_tagged(loop: Loop) -> None:
    pf, daemon, _, _ = loop
    raw = message(101, message_id="<loop-twice@example.org>")
    rcpt = "twice@sink.test"
    pf.send(raw, "ann@example.org", [rcpt])
    pf.wait_for_delivery(1, recipient=rcpt)
    pf.send(raw, "ann@example.org", [rcpt])
    first, second = pf.wait_for_delivery(2, recipient=rcpt, settle=0.5)
    assert first.header("X-Dupfilter") == ["unique"]
    [value] = second.header("X-Dupfilter")
    assert value.startswith("duplicate; score=1.00") and "seen=2" in value
    assert first.data.endswith(raw) and second.data.endswith(raw)
    # The filter's log line carries Postfix's queue id (from XFORWARD IDENT) and the
    # re-injected one; the re-injection smtpd got the original queue id by XFORWARD too.
    # Both are written while the copies travel on (the mail log by postlogd): wait for them.
    deadline = time.monotonic() + 15
    while len(lines := [line for line in daemon.log_text().splitlines()
                        if "msgid=<loop-twice@" in line]) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(lines) == 2, lines
    ident = re.search(r"queue=([0-9A-F]{6,}) ", lines[1])
    queued = re.search(r" queued_as=([0-9A-F]{6,}) ", lines[1])
    assert ident and queued
    pf.wait_log(re.escape(f"{queued.group(1)}: client=localhost[127.0.0.1], "
                          f"orig_queue_id={ident.group(1)}"))


def test_8bit_and_smtputf8_arrive_intact(loop: Loop) -> None:
    pf, _, _, _ = loop
    utf8 = ("From: Jörg <jörg@example.org>\r\nTo: jürgen@sink.test\r\n"
            "Subject: Grüße aus Köln — 東京\r\nMessage-ID: <loop-utf8@example.org>\r\n"
            "Date: Mon, 30 Nov 2026 10:00:00 +0000\r\n"
            "MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n"
            "Content-Transfer-Encoding: 8bit\r\n\r\n"
            "Schöne Grüße, 日本語のテキスト.\r\n"
            + paragraph_text(102, 80).replace("\n", "\r\n")).encode()
    latin1 = ("From: ann@example.org\r\nTo: latin@sink.test\r\nSubject: caf\xe9\r\n"
              "Message-ID: <loop-latin1@example.org>\r\nDate: Mon, 30 Nov 2026 10:00:00 +0000"
              "\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=iso-8859-1\r\n"
              "Content-Transfer-Encoding: 8bit\r\n\r\nd\xe9j\xe0 vu, \xfcber alles\r\n"
              ).encode("latin-1")
    with pf.smtp() as client:
        client.sendmail("jörg@example.org", ["jürgen@sink.test"], utf8,
                        mail_options=["SMTPUTF8", "BODY=8BITMIME"])
        client.sendmail("ann@example.org", ["latin@sink.test"], latin1,
                        mail_options=["BODY=8BITMIME"])
    [got_utf8] = pf.wait_for_delivery(1, recipient="jürgen@sink.test")
    [got_latin1] = pf.wait_for_delivery(1, recipient="latin@sink.test")
    for raw, got in ((utf8, got_utf8), (latin1, got_latin1)):
        assert got.data.endswith(raw)       # every original byte, headers and body
        assert got.header("X-Dupfilter") == ["unique"]
    assert got_utf8.sender == "jörg@example.org"


def test_bare_lf_client_straight_to_the_filter_keeps_its_dots(loop: Loop) -> None:
    """Issue 14 item 7 with Postfix as the next hop: Python's smtplib (bare LF, a dot
    stuffed after each LF) and a CRLF client talk to dupfilter-smtpd directly; Postfix's
    re-injection smtpd delivers every line as it was written (db08d02: "..hidden")."""
    pf, daemon, _, _ = loop
    body = b"x\n.hidden\n..two\n.\nend.\n"
    lf = (b"From: ann@example.org\nTo: lf@sink.test\nSubject: dots\n"
          b"Date: Mon, 30 Nov 2026 10:00:00 +0000\n"
          b"Message-ID: <loop-bare-lf@example.org>\n\n" + body)
    crlf = lf.replace(b"lf@sink", b"crlf@sink").replace(b"<loop-bare-lf@",
                                                        b"<loop-crlf@").replace(b"\n", b"\r\n")
    with smtplib.SMTP("127.0.0.1", daemon.port, local_hostname="client.test",
                      timeout=60) as client:
        client.sendmail("ann@example.org", ["lf@sink.test"], lf)
        client.sendmail("ann@example.org", ["crlf@sink.test"], crlf)
    [got_lf] = pf.wait_for_delivery(1, recipient="lf@sink.test")
    [got_crlf] = pf.wait_for_delivery(1, recipient="crlf@sink.test")
    # smtplib ends the bare-LF message with one more CRLF: an empty last line.
    assert got_lf.data.endswith(lf.replace(b"\n", b"\r\n") + b"\r\n")
    assert got_crlf.data.endswith(crlf)
    for got in (got_lf, got_crlf):
        assert got.header("X-Dupfilter") == ["unique"]
        assert b"\r\n.hidden\r\n..two\r\n.\r\nend.\r\n" in got.data


def test_next_hop_refusal_bounces_only_that_recipient(
        loop: Loop) -> None:
    pf, _, _, _ = loop
    raw = message(103, message_id="<loop-refused@example.org>")
    pf.send(raw, "owner@sink.test", ["kept@sink.test", "refused@sink.test"])
    [kept] = pf.wait_for_delivery(1, recipient="kept@sink.test")
    assert kept.recipients == ("kept@sink.test",)
    [bounce] = pf.wait_for_delivery(1, recipient="owner@sink.test")
    assert bounce.sender == ""
    assert b"refused@sink.test" in bounce.data and b"5.7.1" in bounce.data
    assert b"kept@sink.test" not in bounce.data.split(b"\r\n\r\n", 1)[1].split(b"--")[0]
    assert pf.deliveries("refused@sink.test") == []


def _master_cf_without(pf: PostfixHarness, port: int) -> tuple[str, str]:
    """master.cf text, and the same without the re-injection smtpd on ``port``."""
    path = pf.etc / "master.cf"
    text = path.read_text()
    kept, skipping = [], False
    for line in text.splitlines(keepends=True):
        if line.startswith(f"127.0.0.1:{port} "):
            skipping = True
            continue
        if skipping and line.startswith((" ", "\t")):
            continue
        skipping = False
        kept.append(line)
    return text, "".join(kept)


def test_next_hop_down_defers_then_delivers(loop: Loop) -> None:
    pf, daemon, _, _ = loop
    original, without = _master_cf_without(pf, daemon.next_hop)
    path = pf.etc / "master.cf"
    raw = message(104, message_id="<loop-hopdown@example.org>")
    start = len(pf.log_text())
    path.write_text(without)
    try:
        pf.reload(settle=1.5)
        pf.send(raw, "ann@example.org", ["hopdown@sink.test"])
        pf.wait_log(r"to=<hopdown@sink\.test>.*status=deferred .*said: 451 4\.3\.0",
                    start=start, timeout=20)
        assert pf.deliveries("hopdown@sink.test") == []
    finally:
        path.write_text(original)
        pf.reload(settle=1.5)
    wait_for_port("127.0.0.1", daemon.next_hop)
    pf.flush()
    [got] = pf.wait_for_delivery(1, recipient="hopdown@sink.test", settle=1.0)
    assert got.header("X-Dupfilter") == ["unique"]
    assert len(pf.deliveries("hopdown@sink.test")) == 1


def test_filter_down_defers_then_delivers_once(loop: Loop) -> None:
    pf, daemon, _, _ = loop
    raw = message(105, message_id="<loop-filterdown@example.org>")
    start = len(pf.log_text())
    assert daemon.stop() == 0               # SIGTERM: a clean exit
    try:
        pf.send(raw, "ann@example.org", ["filterdown@sink.test"])
        pf.wait_log(rf"to=<filterdown@sink\.test>.*status=deferred .*:{daemon.port}: "
                    r"Connection refused", start=start, timeout=20)
        time.sleep(0.5)
        assert pf.deliveries("filterdown@sink.test") == []
    finally:
        daemon.start()
    pf.flush()
    [got] = pf.wait_for_delivery(1, recipient="filterdown@sink.test", settle=1.0)
    assert got.header("X-Dupfilter") == ["unique"]
    assert "stopped" in daemon.log_text()


def test_proxy_mode_rejects_a_duplicate_before_the_queue(loop: Loop) -> None:
    pf, _, proxy, port = loop
    raw = message(106, message_id="<proxy-twice@example.org>")
    with smtplib.SMTP("127.0.0.1", port, local_hostname="client.harness.test") as client:
        assert client.sendmail("ann@example.org", ["proxied@sink.test"], raw) == {}
        with pytest.raises(smtplib.SMTPDataError) as caught:
            client.sendmail("ann@example.org", ["proxied@sink.test"], raw)
    assert (caught.value.smtp_code, caught.value.smtp_error) == (
        550, b"5.7.1 Duplicate, not accepted again")
    [got] = pf.wait_for_delivery(1, recipient="proxied@sink.test", settle=1.0)
    assert got.header("X-Dupfilter") == ["unique"] and got.data.endswith(raw)
    assert len(pf.deliveries("proxied@sink.test")) == 1
    assert "action=reject" in proxy.log_text()


def test_proxy_mode_passes_a_recipient_refusal_back_at_rcpt(loop: Loop) -> None:
    pf, _, _, port = loop
    raw = message(107, message_id="<proxy-refused@example.org>")
    with smtplib.SMTP("127.0.0.1", port, local_hostname="client.harness.test") as client:
        refused = client.sendmail("proxyowner@sink.test", ["proxykept@sink.test",
                                                      "refused@sink.test"], raw)
    # The sender is told at once, while still connected: no bounce is needed.
    assert list(refused) == ["refused@sink.test"] and refused["refused@sink.test"][0] == 554
    [got] = pf.wait_for_delivery(1, recipient="proxykept@sink.test", settle=1.0)
    assert got.recipients == ("proxykept@sink.test",)
    assert pf.deliveries("proxyowner@sink.test") == []
