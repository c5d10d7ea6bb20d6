"""Unit level: the milter class in-process (pymilter's TestCtx) and the daemon helpers."""

from __future__ import annotations

import io
import logging
import os
import socket
from email.message import EmailMessage

import Milter
import pytest
from doc_blocks import blocks
from Milter import testctx
from support.daemons import parse_fields
from test_decision import PARTIAL_ROWS

from mailfilter import logs, service
from mailfilter.config import LogSettings, Settings
from mailfilter.logs import MILTER_LINE, Outcome
from mailfilter.milter.server import set_listener_nodelay
from mailfilter.milter.session import DupfilterMilter, Runtime

NO_REPLY_BITS = (Milter.P_NR_CONN | Milter.P_NR_HELO | Milter.P_NR_MAIL | Milter.P_NR_RCPT
                 | Milter.P_NR_DATA | Milter.P_NR_UNKN | Milter.P_NR_EOH | Milter.P_NR_BODY
                 | Milter.P_NR_HDR)
TEXT = ("Please find the minutes of yesterday's planning meeting below. We agreed to move "
        "the release to the second week of June, to freeze features on the twentieth, and "
        "to hold a short review every Thursday afternoon until then.")


class Ctx(testctx.TestCtx):
    """TestCtx as an MTA without no-reply support (TestCtx stops at a NOREPLY answer)."""

    def __init__(self) -> None:
        super().__init__()
        self.quarantined: str | None = None

    def quarantine(self, reason: str) -> None:
        self.quarantined = reason


@pytest.fixture
def runtime(tmp_path, monkeypatch):
    # TestCtx._negotiate reads TestCtx.default_opts (the class attribute) itself.
    monkeypatch.setattr(testctx.TestCtx, "default_opts",
                        [Milter.CURR_ACTS, 0x1FFFFF & ~NO_REPLY_BITS, 0, 0])

    def make(**actions: str) -> Runtime:
        settings = Settings()
        settings.store.path = str(tmp_path / "db")
        for verdict, action in actions.items():
            setattr(settings.milter.actions, verdict, action)
        logger = logging.getLogger(f"dupfilter-test-{tmp_path.name}")
        rt = Runtime(settings, logger)
        assert rt.open_engine()
        DupfilterMilter.runtime = rt
        Milter.factory = DupfilterMilter
        return rt

    made: list[Runtime] = []
    yield lambda **kw: made.append(make(**kw)) or made[-1]
    for rt in made:
        rt.close()


def feed(text: str = TEXT, rcpts: tuple[str, ...] = ("bob@example.test",),
         **headers: str) -> tuple[Ctx, int]:
    msg = EmailMessage()
    msg["From"] = "alice@example.test"
    msg["Subject"] = "Minutes"
    for name, value in headers.items():
        msg[name.replace("_", "-")] = value
    msg.set_content(text)
    ctx = Ctx()
    ctx._connect(ip="127.0.0.1")
    rc = ctx._feedFile(io.BytesIO(msg.as_bytes()), "alice@example.test", *rcpts)
    return ctx, rc


def test_testctx_tag_then_duplicate(runtime):
    runtime()
    ctx, rc = feed()
    assert rc == Milter.ACCEPT and ctx._msg["X-Dupfilter"] == "unique"
    ctx, rc = feed(X_Dupfilter="forged")
    assert rc == Milter.ACCEPT
    assert ctx._msg.get_all("X-Dupfilter")[0].startswith("duplicate; score=1.00")
    assert len(ctx._msg.get_all("X-Dupfilter")) == 1


def test_testctx_drop_recipients_and_quarantine(runtime):
    runtime(duplicate="drop-recipients")
    feed(rcpts=("bob@example.test",))
    ctx, rc = feed(rcpts=("bob@example.test", "carol@example.test"))
    assert rc == Milter.ACCEPT and ctx._delrcpt == ["<bob@example.test>"]
    ctx, rc = feed(rcpts=("bob@example.test", "carol@example.test"))
    assert rc == Milter.DISCARD


@pytest.mark.parametrize("action", ["discard", "reject", "tempfail"])
def test_testctx_partial_duplicate_still_reaches_new_recipients(runtime, action):
    """Recipient scope: bob had it, carol did not.  discard must not take carol's copy, nor
    reject refuse it, nor tempfail defer it (every retry would be deferred again, until
    the queue gives up and bounces it): bob's copy is dropped (discard; carol's copy, new
    to her, is tagged unique) or all are tagged partial (reject, tempfail: one header for
    both copies, which the recipes do not file away for carol)."""
    runtime(duplicate=action)
    feed(rcpts=("bob@example.test",))
    ctx, rc = feed(rcpts=("bob@example.test", "carol@example.test"))
    assert rc == Milter.ACCEPT
    assert ctx._msg.get_all("X-Dupfilter") == (
        ["unique"] if action == "discard" else [ctx._msg["X-Dupfilter"]])
    if action != "discard":
        assert ctx._msg["X-Dupfilter"].startswith(
            "partial; rcpts_seen=1/2; verdict=duplicate; score=1.00")
    assert ctx._delrcpt == (["<bob@example.test>"] if action == "discard" else [])
    ctx, rc = feed(rcpts=("bob@example.test", "carol@example.test"))   # both had it now
    assert rc == {"discard": Milter.DISCARD, "reject": Milter.REJECT,
                  "tempfail": Milter.TEMPFAIL}[action]


@pytest.mark.parametrize("row", PARTIAL_ROWS, ids=lambda row: row.id)
def test_testctx_partial_duplicate_table(runtime, caplog, row):
    """The planner's partial-duplicate rows through the milter (bob had it, carol not)."""
    rt = runtime(duplicate=row.duplicate)
    feed(rcpts=("bob@example.test",))               # recorded under unique = "tag"
    rt.settings.milter.actions.unique = row.unique
    with caplog.at_level(logging.INFO, logger=rt.logger.name):
        ctx, rc = feed(rcpts=("bob@example.test", "carol@example.test"))
    [line] = [r.getMessage() for r in caplog.records if " action=" in f" {r.getMessage()}"]
    fields = parse_fields(line)
    assert (fields["action"], fields.get("note")) == (row.action, row.note)
    if not row.carol:
        assert rc == {250: Milter.DISCARD, 550: Milter.REJECT, 451: Milter.TEMPFAIL}[row.reply]
        return
    assert rc == Milter.ACCEPT
    assert ctx._delrcpt == ([] if row.bob else ["<bob@example.test>"])
    values = ctx._msg.get_all("X-Dupfilter") or []
    assert [v.split(";")[0] for v in values] == ([row.header] if row.header else [])
    assert (ctx.quarantined is not None) == row.quarantined


def test_testctx_quarantine_and_reject(runtime, tmp_path):
    rt = runtime(duplicate="quarantine")
    feed()
    ctx, rc = feed()
    assert rc == Milter.ACCEPT and ctx.quarantined.startswith("dupfilter: duplicate (duplicate;")
    rt.settings.milter.actions.duplicate = "reject"
    ctx, rc = feed()
    assert rc == Milter.REJECT
    assert ctx._reply == ("550", "5.7.1", "Duplicate message refused")


@pytest.mark.parametrize("error", [RuntimeError("disk on fire"),
                                   SystemExit("a library gave up")], ids=repr)
def test_testctx_internal_error_is_on_error_never_reject(runtime, monkeypatch, error):
    """Any error at end of message follows on_error.  SystemExit from a library is not an
    Exception: escaping eom it would reach pymilter, whose PyErr_Print ends the whole
    milter (and any other error there is a TEMPFAIL)."""
    rt = runtime(duplicate="reject")

    def broken(*args, **kwargs):
        raise error

    monkeypatch.setattr(rt.analyses, "analyse", broken)
    ctx, rc = feed()
    assert rc == Milter.ACCEPT and ctx._msg["X-Dupfilter"] is None
    rt.settings.milter.on_error = "tempfail"
    ctx, rc = feed()
    assert rc == Milter.TEMPFAIL and ctx._reply[0] == "451"


def test_listener_nodelay_is_set_and_inherited():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert set_listener_nodelay(f"inet:{port}@127.0.0.1", logging.getLogger("t"),
                                    fds=[listener.fileno()]) == 1
        assert listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        with socket.create_connection(("127.0.0.1", port)):
            accepted, _ = listener.accept()
            with accepted:
                assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    assert set_listener_nodelay("unix:/tmp/x.sock", logging.getLogger("t")) == 0


# ----------------------------------------------------------- daemon helpers (logs, service)

def test_key_value_line_is_stable_and_parseable(capsys):
    logger = logs.setup_logging(LogSettings(), "dupfilter-unit")
    logger.info(logs.format_fields(dict(
        queue="4ABC", verdict="near-duplicate", score=0.93333, match="<a b@x>",
        note='say "hi"\nthere', empty=None, ok=True, n=3)))
    line = capsys.readouterr().err.strip()
    assert line == ('INFO queue=4ABC verdict=near-duplicate score=0.9333 match="<a b@x>" '
                    'note="say \\"hi\\" there" empty=- ok=yes n=3')
    fields = parse_fields(line.split(" ", 1)[1])
    assert fields["note"] == 'say "hi" there' and fields["match"] == "<a b@x>"


def test_syslog_falls_back_to_stderr_when_dev_log_is_missing(monkeypatch, capsys):
    monkeypatch.setattr(logs, "SYSLOG_SOCKET", "/nonexistent/dev-log")
    logger = logs.setup_logging(LogSettings(target="syslog"), "dupfilter-unit2")
    logger.info("x=1")
    err = capsys.readouterr().err
    assert "syslog unavailable" in err and "INFO x=1" in err


def test_verdict_fields(runtime):
    rt = runtime()
    engine = rt.engine()
    raw = f"Message-ID: <m1@x>\r\nSubject: s\r\n\r\n{TEXT}\r\n".encode()
    engine.check(raw, ["a@x"])
    verdict = engine.check(raw.replace(b"m1@x", b"m2@x"), ["a@x"], record=False)
    fields = logs.verdict_fields(verdict)
    assert list(fields) == ["verdict", "score", "reason", "match", "match_doc", "seen",
                            "msgid", "rcpts_seen", "defects", "rule"]
    assert fields["verdict"] == "duplicate" and fields["match"] == "<m1@x>"
    assert fields["msgid"] == "<m2@x>" and fields["rcpts_seen"] == 1
    line = Outcome(MILTER_LINE, "tag", verdict, queue="Q1", size=10, capped=False, rcpts=1,
                   dropped=0, recorded="yes", ms=0.5).fields()
    assert list(line) == ["queue", "action", *fields, "bytes", "capped", "rcpts", "dropped",
                          "recorded", "ms"]     # note= only when there is one
    for example in blocks("milter-log"):         # the example lines of the docs
        assert list(line) == list(parse_fields(example.text.split(" ", 1)[1])), example


def test_privileges(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(service.DaemonError, match="refusing to run as root"):
        service.check_privileges(None, False)
    service.check_privileges(None, True)
    with pytest.raises(service.DaemonError, match="no such user"):
        service.check_privileges("no-such-user-here", False)


def test_socket_permissions_missing_group_only_logs(tmp_path, caplog):
    path = tmp_path / "s"
    path.write_text("")
    logger = logging.getLogger("dupfilter-unit3")
    logger.propagate = True
    with caplog.at_level(logging.WARNING, logger="dupfilter-unit3"):
        service.set_socket_permissions(str(path), "0640", "no-such-group-here", logger)
    assert oct(path.stat().st_mode & 0o777) == "0o640"
    assert "does not exist" in caplog.text


def test_testctx_a_failing_log_line_does_not_undo_the_decision(runtime):
    """Once the message is acted on and recorded, a log (or metrics) failure must not turn
    it into on_error: a 451 now would make the client's retry a duplicate (discarded)."""
    rt = runtime(duplicate="discard")
    rt.settings.milter.on_error = "tempfail"

    class Broken(logging.Filter):
        def filter(self, record):
            raise OSError("log device gone")

    broken = Broken()
    rt.logger.setLevel(logging.INFO)
    rt.logger.addFilter(broken)
    try:
        ctx, rc = feed()
    finally:
        rt.logger.removeFilter(broken)
    assert rc == Milter.ACCEPT and ctx._msg["X-Dupfilter"] == "unique"
    ctx, rc = feed()
    assert rc == Milter.DISCARD     # it was recorded: this copy is the duplicate
