"""End to end: real Postfix (private instance on loopback) → dupfilter-milter → delivery.

One Postfix per module (startup ~3 s) with ``smtpd_milters`` pointing at a unix socket;
each test starts its own ``dupfilter-milter`` (own config and store) on that socket.
Messages are sent with smtplib; copies land in a Maildir (``*@maildir.test``) or in the
loopback SMTP sink (``*@sink.test``).
"""

from __future__ import annotations

import re
import smtplib
import statistics
import time
from email.message import EmailMessage
from email.utils import make_msgid

import pytest
from support.daemons import MilterDaemon
from support.postfix import PostfixHarness
from support.smtp_sink import Delivery

TEXT = (
    "Dear team, the new expense policy takes effect on the first of next month. Receipts "
    "above fifty euros need a scanned copy, travel must be booked through the portal, and "
    "hotel stays longer than three nights need approval from your manager in advance. "
    "The finance office will run two short sessions next week to walk through the changes."
)


@pytest.fixture(scope="module")
def postfix():
    pf = PostfixHarness(main_cf=[
        "smtpd_milters = unix:{root}/milter/milter.sock",
        "non_smtpd_milters = $smtpd_milters",        # sendmail(1)/pickup mail too
        "milter_default_action = tempfail",
        "milter_protocol = 6",
    ])
    (pf.root / "milter").mkdir(mode=0o755)
    pf.start()
    yield pf
    pf.stop()


@pytest.fixture
def milter(postfix, tmp_path):
    """Start dupfilter-milter with a given config on the socket Postfix uses."""
    started: list[MilterDaemon] = []

    def start(config: str = "", kind: str = "unix", **kw) -> MilterDaemon:
        socket_path = postfix.root / "milter" / "milter.sock" if kind == "unix" else None
        # Debug level logs each group commit: tests wait for it (see MilterDaemon.recorded).
        config = '[log]\nlevel = "debug"\n' + config
        d = MilterDaemon(tmp_path / f"m{len(started)}", config, kind=kind,
                         socket_path=socket_path, **kw)
        started.append(d)
        return d.start()

    postfix.clear()
    yield start
    for d in started:
        d.__exit__()


def message(subject: str = "Expense policy", text: str = TEXT, **headers: str) -> bytes:
    msg = EmailMessage()
    msg["From"] = "finance@example.test"
    msg["To"] = "team@example.test"
    msg["Subject"] = subject
    msg["Message-ID"] = make_msgid(domain="example.test")
    for name, value in headers.items():
        msg[name.replace("_", "-")] = value
    msg.set_content(text)
    return msg.as_bytes().replace(b"\n", b"\r\n")


def test_second_copy_arrives_tagged(postfix, milter):
    d = milter("")
    forged = message(X_Dupfilter="unique; forged by the sender")
    postfix.send(forged, "finance@example.test", ["alice@maildir.test", "bob@sink.test"])
    first = postfix.wait_for_delivery(2)
    for copy in first:
        assert copy.header("X-Dupfilter") == ["unique"], copy.where
    d.wait_recorded(1)
    postfix.send(message(), "finance@example.test", ["alice@maildir.test", "bob@sink.test"])
    alice = postfix.wait_for_delivery(2, recipient="alice@maildir.test")
    bob = postfix.wait_for_delivery(2, recipient="bob@sink.test")
    for copies in (alice, bob):
        value, = copies[-1].header("X-Dupfilter")
        assert re.match(r"duplicate; score=1\.00; reason=digest; match=<[^>]+>; seen=2$",
                        value), value
    # One log line per message, carrying Postfix's queue id.
    lines = d.wait_lines(2)
    assert [line["verdict"] for line in lines] == ["unique", "duplicate"]
    for line in lines:          # postlogd writes the mail log a little later: wait for it
        postfix.wait_log(rf"postfix/cleanup\[\d+\]: {line['queue']}: message-id=")


def test_forged_header_with_space_before_colon_is_removed(postfix, milter):
    """RFC 5322's obsolete syntax allows ``X-Dupfilter :``; Postfix and mail readers take
    it for the same field, so the milter must remove it like any other forged one."""
    milter("")
    forged = message().replace(b"\r\nSubject:",
                               b"\r\nX-Dupfilter : duplicate; forged\r\nSubject:", 1)
    assert b"X-Dupfilter : duplicate" in forged
    postfix.send(forged, "finance@example.test", ["alice@maildir.test"])
    copy, = postfix.wait_for_delivery(1)
    head = copy.data.split(b"\r\n\r\n", 1)[0].split(b"\n\n", 1)[0]
    fields = re.findall(rb"^x-dupfilter[ \t]*:(.*)$", head, re.IGNORECASE | re.MULTILINE)
    assert [value.strip() for value in fields] == [b"unique"], head


def test_near_duplicate_tagged_end_to_end(postfix, milter):
    d = milter("")
    postfix.send(message(), "finance@example.test", ["carol@maildir.test"])
    d.wait_recorded(1)
    edited = TEXT.replace("fifty euros", "sixty euros").replace("two short", "three short")
    postfix.send(message(text=edited), "finance@example.test", ["carol@maildir.test"])
    copies = postfix.wait_for_delivery(2, recipient="carol@maildir.test")
    # The first copy was not waited for: Postfix may deliver the two in either order.
    verdicts = {b"sixty euros" in copy.data: copy.header("X-Dupfilter") for copy in copies}
    assert verdicts[False] == ["unique"]
    value, = verdicts[True]
    assert value.startswith("near-duplicate; score=") and "reason=shingles" in value


def test_a_co_recipient_who_never_had_it_is_not_told_duplicate(postfix, milter):
    """alice had the message; one copy to alice and bob under the default tag reaches both
    with one header, ``partial; rcpts_seen=1/2; …``, which the procmail recipe's
    ``^X-Dupfilter: (near-)?duplicate`` does not match.  Before, both read ``duplicate``
    and the documented recipes filed bob's first copy away."""
    d = milter("")
    postfix.send(message(), "finance@example.test", ["alice@maildir.test"])
    d.wait_recorded(1)
    postfix.send(message(), "finance@example.test", ["alice@maildir.test", "bob@maildir.test"])
    bob, = postfix.wait_for_delivery(1, recipient="bob@maildir.test")
    value, = bob.header("X-Dupfilter")
    assert value.startswith("partial; rcpts_seen=1/2; verdict=duplicate; score=1.00"), value
    assert not re.match(r"(near-)?duplicate", value)


def test_reject_mode_client_gets_550(postfix, milter):
    d = milter('[milter.actions]\nduplicate = "reject"\n'
               '[milter]\nreject_message = "Already delivered once"\n')
    postfix.send(message(), "finance@example.test", ["dave@maildir.test"])
    d.wait_recorded(1)
    with pytest.raises(smtplib.SMTPDataError) as refused:
        postfix.send(message(), "finance@example.test", ["dave@maildir.test"])
    assert refused.value.smtp_code == 550
    assert refused.value.smtp_error.decode() == "5.7.1 Already delivered once"
    assert len(postfix.wait_for_delivery(1, recipient="dave@maildir.test", settle=1.0)) == 1


def test_drop_recipients_only_the_new_recipient_gets_it(postfix, milter):
    d = milter('[milter.actions]\nduplicate = "drop-recipients"\n'
               'near_duplicate = "drop-recipients"\n')
    postfix.send(message(), "finance@example.test", ["alice@maildir.test"])
    postfix.wait_for_delivery(1, recipient="alice@maildir.test")
    d.wait_recorded(1)
    postfix.send(message(), "finance@example.test", ["alice@maildir.test", "erin@sink.test"])
    erin = postfix.wait_for_delivery(1, recipient="erin@sink.test", settle=1.5)
    d.wait_recorded(2)
    assert erin[0].recipients == ("erin@sink.test",)
    assert erin[0].header("X-Dupfilter") == ["unique"]     # new to erin: the unique action
    assert len(postfix.deliveries("alice@maildir.test")) == 1
    # Everyone had it: the whole message is discarded (the client still sees 250).
    postfix.send(message(), "finance@example.test", ["alice@maildir.test", "erin@sink.test"])
    assert [line["action"] for line in d.wait_lines(3)] == ["tag", "drop-recipients",
                                                            "discard"]
    time.sleep(1.5)
    assert len(postfix.deliveries("alice@maildir.test")) == 1
    assert len(postfix.deliveries("erin@sink.test")) == 1
    assert "milter triggers DISCARD action" in postfix.log_text()


def test_tempfail_and_discard_end_to_end(postfix, milter):
    d = milter('[milter.actions]\nduplicate = "tempfail"\nnear_duplicate = "discard"\n')
    postfix.send(message(), "finance@example.test", ["bob@sink.test"])
    d.wait_recorded(1)
    with pytest.raises(smtplib.SMTPDataError) as deferred:
        postfix.send(message(), "finance@example.test", ["bob@sink.test"])
    assert deferred.value.smtp_code == 451
    edited = TEXT.replace("fifty euros", "sixty euros").replace("two short", "three short")
    postfix.send(message(text=edited), "finance@example.test", ["bob@sink.test"])
    assert len(postfix.wait_for_delivery(1, recipient="bob@sink.test", settle=1.5)) == 1


def test_quarantine_holds_the_message(postfix, milter):
    d = milter('[milter.actions]\nduplicate = "quarantine"\n')
    postfix.send(message(), "finance@example.test", ["bob@maildir.test"])
    postfix.wait_for_delivery(1, recipient="bob@maildir.test")
    d.wait_recorded(1)
    postfix.send(message(), "finance@example.test", ["bob@maildir.test"])
    postfix.wait_log(r"milter triggers HOLD action")
    held = [m for m in postfix.queue() if m.get("queue_name") == "hold"]
    assert len(held) == 1
    assert len(postfix.deliveries("bob@maildir.test")) == 1
    postfix.postsuper("-d", "ALL", "hold")


def test_milter_down_default_action_decides_and_nothing_is_lost(postfix, milter):
    d = milter("")
    postfix.send(message(), "finance@example.test", ["carol@sink.test"])
    postfix.wait_for_delivery(1, recipient="carol@sink.test")
    d.kill()                                       # SIGKILL: no goodbye
    # milter_default_action = tempfail: the client is told to retry (it keeps the message).
    with pytest.raises(smtplib.SMTPResponseException) as deferred:
        postfix.send(message(), "finance@example.test", ["carol@sink.test"])
    assert deferred.value.smtp_code == 451
    try:
        postfix.postconf("milter_default_action = accept")
        postfix.send(message(), "finance@example.test", ["carol@sink.test"])
        copies = postfix.wait_for_delivery(2, recipient="carol@sink.test")
        assert copies[-1].header("X-Dupfilter") == []          # passed unchecked
        assert "Connection refused" in postfix.log_text()
    finally:
        postfix.postconf("milter_default_action = tempfail")
    # Back up: mail is checked again.
    milter("")
    postfix.send(message(), "finance@example.test", ["carol@sink.test"])
    copies = postfix.wait_for_delivery(3, recipient="carol@sink.test")
    assert copies[-1].header("X-Dupfilter") == ["unique"]   # a fresh store


def local(raw: bytes) -> bytes:
    """``raw`` as a local program hands it to sendmail(1): LF line ends."""
    return raw.replace(b"\r\n", b"\n")


# Pickup's own scan, once a minute, brings what a lost kick did not (PostfixHarness.submit).
LOCAL_WAIT = 90.0


def maildrop(postfix: PostfixHarness) -> list[dict]:
    return [m for m in postfix.queue() if m.get("queue_name") == "maildrop"]


def submit_twice(postfix: PostfixHarness, daemon: MilterDaemon,
                 sender: str = "finance@example.test") -> Delivery:
    """Hand the same message to sendmail(1) twice for dave, the second time once the first
    was delivered (returned) and recorded."""
    raw = local(message())
    postfix.submit(raw, sender, ["dave@maildir.test"])
    first, = postfix.wait_for_delivery(1, recipient="dave@maildir.test", timeout=LOCAL_WAIT)
    daemon.wait_recorded(1)
    postfix.submit(raw, sender, ["dave@maildir.test"])
    return first


def test_local_submission_is_checked_through_non_smtpd_milters(postfix, milter):
    d = milter("")
    first = submit_twice(postfix, d)
    assert first.header("X-Dupfilter") == ["unique"]
    copies = postfix.wait_for_delivery(2, recipient="dave@maildir.test", timeout=LOCAL_WAIT)
    value, = copies[-1].header("X-Dupfilter")
    assert value.startswith("duplicate; score=1.00;"), value
    assert [line["verdict"] for line in d.wait_lines(2)] == ["unique", "duplicate"]


def test_local_duplicate_tempfailed_waits_in_the_maildrop_queue(postfix, milter):
    """tempfail on non-SMTP mail: Postfix keeps the message in its maildrop queue and pickup
    tries it again every minute, for ever (nothing bounces it), as it does while the milter
    is down; once the action is changed it is delivered.  Nothing is lost, but it never
    leaves by itself (docs/postfix.md)."""
    d = milter('[milter.actions]\nduplicate = "tempfail"\n')
    submit_twice(postfix, d)
    postfix.wait_log(r"milter-reject: END-OF-MESSAGE from localhost\[127\.0\.0\.1\]: 4\.7\.1 ",
                     timeout=LOCAL_WAIT)
    assert len(maildrop(postfix)) == 1
    assert len(postfix.deliveries("dave@maildir.test")) == 1
    d.kill()
    # The milter down (milter_default_action = tempfail): it waits there too.
    seen = len(postfix.log_text())
    postfix.kick_pickup()
    postfix.wait_log(r"postfix/cleanup\[\d+\]: warning: connect to Milter service",
                     timeout=LOCAL_WAIT, start=seen)
    assert len(maildrop(postfix)) == 1
    milter("", db=d.db)                     # the same store, now tagging duplicates
    postfix.kick_pickup()
    copies = postfix.wait_for_delivery(2, recipient="dave@maildir.test", timeout=LOCAL_WAIT)
    assert copies[-1].header("X-Dupfilter")[0].startswith("duplicate;")
    assert maildrop(postfix) == []


def test_local_duplicate_rejected_bounces_to_its_sender(postfix, milter):
    """reject on non-SMTP mail: there is no SMTP client to refuse, so Postfix bounces it."""
    d = milter('[milter.actions]\nduplicate = "reject"\n')
    submit_twice(postfix, d, sender="finance@sink.test")
    bounce, = postfix.wait_for_delivery(1, recipient="finance@sink.test",
                                       timeout=LOCAL_WAIT)
    assert bounce.sender == ""                               # a non-delivery notification
    assert b"Duplicate message refused" in bounce.data
    assert len(postfix.deliveries("dave@maildir.test")) == 1


def _median_ms(postfix: PostfixHarness, count: int = 12) -> float:
    raw = message()
    times = []
    with postfix.smtp() as client:
        for _ in range(count):
            started = time.perf_counter()
            client.sendmail("finance@example.test", ["bob@sink.test"], raw)
            times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times[2:])


def test_tcp_milter_has_no_nagle_stall(postfix, milter):
    """Over TCP, Nagle + delayed ACK cost ~2 x 40 ms a message; our fixes remove both."""
    slow = milter("", kind="inet", args=("--allow-root", "--no-tcp-fixes"))
    postfix.postconf(f"smtpd_milters = {slow.postfix_spec}")
    rounds = 1
    try:
        stalled = _median_ms(postfix)
        slow.stop()
        fast = milter("", kind="inet")
        postfix.postconf(f"smtpd_milters = {fast.postfix_spec}")
        fixed = _median_ms(postfix)
        # A busy CI machine can slow one round of 12 messages down; a stall cannot go away
        # by measuring again (it costs >= 40 ms each time), so the best of 3 rounds counts.
        while rounds < 3 and not (fixed < 45 and fixed < stalled / 2):
            fixed = min(fixed, _median_ms(postfix))
            rounds += 1
    finally:
        postfix.postconf(f"smtpd_milters = unix:{postfix.root}/milter/milter.sock")
    assert stalled > 75, f"expected the two delayed-ACK stalls, got {stalled:.1f} ms"
    # Two delayed ACKs are >= 80 ms; a fixed message takes a few ms (45: room for a busy CI).
    assert fixed < 45 and fixed < stalled / 2, \
        f"TCP message took {fixed:.1f} ms (stalled: {stalled:.1f} ms, best of {rounds})"
    postfix.wait_for_delivery(12 * (1 + rounds), recipient="bob@sink.test")


def test_a_message_with_more_forged_headers_than_can_be_taken_out_is_refused(postfix,
                                                                             milter):
    """Each incoming X-Dupfilter is deleted by an edit of its own, on which Postfix's
    cleanup spends longer the more there are (20,000 made it panic, and the message
    tempfailed on every try): past 100 the message is refused, said in the log; up to
    100 every one is taken out."""
    d = milter("")
    many = message().replace(b"\r\nSubject:", b"\r\n" + b"X-Dupfilter: unique\r\n" * 101
                             + b"Subject:", 1)
    with pytest.raises(smtplib.SMTPDataError) as refused:
        postfix.send(many, "finance@example.test", ["alice@maildir.test"])
    assert refused.value.smtp_code == 554 and b"5.7.1" in refused.value.smtp_error
    line, = d.wait_lines(1)
    assert line["action"] == "refused" and line["reason"] == "incoming-headers", line
    allowed = message().replace(b"\r\nSubject:", b"\r\n" + b"X-Dupfilter: unique\r\n" * 100
                                + b"Subject:", 1)
    postfix.send(allowed, "finance@example.test", ["alice@maildir.test"])
    copy, = postfix.wait_for_delivery(1)
    head = copy.data.split(b"\r\n\r\n", 1)[0].split(b"\n\n", 1)[0]
    fields = re.findall(rb"^x-dupfilter[ \t]*:(.*)$", head, re.IGNORECASE | re.MULTILINE)
    assert [value.strip() for value in fields] == [b"unique"], fields[:3]
