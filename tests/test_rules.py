"""The pair rules (mailfilter/rules/) for mail programs send, for links, and for the
thresholds that depend on sender and subject — end to end, through real stores.

A cron report whose output changed is a new report; a newsletter copy whose tracking links
differ is the same newsletter; one sender under one subject gets a relaxed threshold, one
sender domain under another subject a strict one.  The threshold tests first check that
the pair's resemblance lies between the two settings compared, so that a verdict that
moves can only have moved because of the setting.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import make_message, paragraph_text

from mailfilter.config import Settings, load_settings
from mailfilter.detector import Verdict
from mailfilter.engine import Engine
from mailfilter.headers import verdict_value
from mailfilter.message import parse

DF = """Filesystem      Size  Used Avail Use% Mounted on
udev            3.9G     0  3.9G   0% /dev
tmpfs           796M  1.2M  795M   1% /run
/dev/sda1        50G   31G   17G  65% /
tmpfs           3.9G     0  3.9G   0% /dev/shm
tmpfs           5.0M  4.0K  5.0M   1% /run/lock
/dev/sda2       976M  211M  699M  24% /boot
/dev/sdb1       917G  402G  469G  47% /srv/data
/dev/sdc1       1.8T  1.1T  611G  65% /srv/backup
tmpfs           796M   24K  796M   1% /run/user/1000
"""
QUEUE_LINE = ("The mail queue is empty and every message was delivered to its destination "
              "without delay")
LOGWATCH = f""" ################### Logwatch 7.5.6 (07/23/21) ####################
        Processing Initiated: Mon Nov 30 06:25:01 2026
        Date Range Processed: yesterday
        Detail Level of Output: 0
        Logfiles for Host: web01
 ##################################################################

 --------------------- Cron Begin ------------------------
 Commands Run:
    User root:
       test -x /usr/sbin/anacron || ( cd / && run-parts --report /etc/cron.daily ): 1 Time(s)
 ---------------------- Cron End -------------------------

 --------------------- SSHD Begin ------------------------
 Users logging in through sshd:
    deploy:
       10.0.0.5: 3 times
 ---------------------- SSHD End -------------------------

 --------------------- Postfix Begin ------------------------
    {QUEUE_LINE}
 ---------------------- Postfix End -------------------------

 ###################### Logwatch End #########################
"""
CRON = {"X-Cron-Env": "<SHELL=/bin/sh>"}


def run(settings: Settings, folder: Path, *messages: bytes) -> Verdict:
    """Deliver ``messages`` in order to a fresh store; the last verdict."""
    with Engine(settings, str(folder / "store")) as engine:
        verdicts = [engine.check(raw) for raw in messages]
    return verdicts[-1]


def report(body: str, number: int, *, sender: str = "root@web01.example.com",
           headers: dict[str, str] | None = None,
           subject: str = "Cron <root@web01> df -h") -> bytes:
    return make_message(body, sender=sender, subject=subject,
                        message_id=f"<cron{number}@web01.example.com>",
                        headers=CRON if headers is None else headers)


def with_toml(tmp_path: Path, text: str) -> Settings:
    """Settings as dupfilter reads them from a configuration file."""
    path = tmp_path / "dupfilter.toml"
    path.write_text(text, encoding="utf-8")
    return load_settings(path)


# -- which mail a program sent ---------------------------------------------------------


@pytest.mark.parametrize(("sender", "headers"), [
    ("ops@example.com", {"Auto-Submitted": "auto-generated"}),
    ("ops@example.com", {"Auto-Submitted": "auto-replied"}),
    ("ops@example.com", {"X-Cron-Env": "<HOME=/root>"}),
    ("root@web01.example.com", {}),
    ("cron@example.com", {}),
    ("noreply@example.com", {}),
    ("no-reply.billing@example.com", {}),
    ("Jenkins@ci.example.com", {}),
])
def test_mail_a_program_sent_is_automated(sender: str, headers: dict[str, str]) -> None:
    """RFC 3834's Auto-Submitted, cron's X-Cron-Env, or a program's address."""
    assert parse(make_message("x", sender=sender, headers=headers)).automated


@pytest.mark.parametrize(("sender", "headers"), [
    ("ops@example.com", {"Auto-Submitted": "no"}),
    ("ann@example.com", {}),
    ("noreply@example.com", {"List-Id": "<announce.lists.example.com>"}),
    ("root@example.com", {"List-Unsubscribe": "<mailto:leave@lists.example.com>"}),
])
def test_people_and_lists_are_not_automated(sender: str, headers: dict[str, str]) -> None:
    """Auto-Submitted: no is a person; list and newsletter mail is written by people
    even from a noreply address (copies differ by design)."""
    assert not parse(make_message("x", sender=sender, headers=headers)).automated


# -- cron and monitoring reports -------------------------------------------------------


def test_a_cron_report_with_one_figure_changed_is_unique(settings: Settings,
                                                         tmp_path: Path) -> None:
    """df on the next day: 65% became 66% — the admin must see it."""
    changed = DF.replace("31G   17G  65% /\n", "32G   16G  66% /\n")
    verdict = run(settings, tmp_path, report(DF, 1), report(changed, 2))
    assert verdict.kind == "unique", verdict_value(verdict)
    assert verdict.evidence[0].rule == "identifiers"


def test_the_same_cron_report_again_is_a_duplicate(settings: Settings,
                                                   tmp_path: Path) -> None:
    """Nothing changed: the second mail is a copy."""
    verdict = run(settings, tmp_path, report(DF, 1), report(DF, 2))
    assert (verdict.kind, verdict.measure) == ("duplicate", "digest")


def test_a_report_that_lost_a_line_is_new_but_a_note_that_did_is_not(
        settings: Settings, tmp_path: Path) -> None:
    """A file system gone from df is news from a program; the same text from a person,
    one line shorter, is an edited copy."""
    shorter = "\n".join(line for line in DF.split("\n") if "/srv/data" not in line)
    program = run(settings, tmp_path / "cron", report(DF, 1), report(shorter, 2))
    person = run(settings, tmp_path / "ann",
                 report(DF, 1, sender="ann@example.com", headers={}),
                 report(shorter, 2, sender="ann@example.com", headers={}))
    assert program.kind == "unique", verdict_value(program)
    assert "sent by a program" in program.evidence[0].note
    assert person.kind == "near-duplicate", verdict_value(person)


def _logwatch_pair(new_line: str) -> tuple[bytes, bytes]:
    mail = [make_message(LOGWATCH.replace(QUEUE_LINE, line), subject="Logwatch for web01",
                         sender="logwatch@web01.example.com", message_id=f"<lw{n}@web01>")
            for n, line in enumerate((QUEUE_LINE, new_line))]
    return mail[0], mail[1]


CHANGED_WORDS = ("The mail queue holds deferred messages because the relay refused "
                 "every connection")


def test_automated_threshold_decides_a_report_with_the_same_data(
        settings: Settings, tmp_path: Path) -> None:
    """Same figures, one sentence rewritten: below automated_threshold (0.9) it is a new
    report; with the threshold lowered under its resemblance, a near-duplicate."""
    first, second = _logwatch_pair(CHANGED_WORDS)
    strict = run(settings, tmp_path / "strict", first, second)
    resemblance = strict.evidence[0].resemblance
    assert resemblance is not None and 0.5 < resemblance < settings.detector.automated_threshold
    assert strict.kind == "unique", verdict_value(strict)
    assert "sent by a program" in strict.evidence[0].note
    relaxed = with_toml(tmp_path, "[detector]\nautomated_threshold = 0.5\n")
    assert run(relaxed, tmp_path / "relaxed", first, second).kind == "near-duplicate"


# -- links -----------------------------------------------------------------------------


def _newsletter(recipient: str, token: str, number: int) -> bytes:
    body = (f"Hi {recipient},\n\n{paragraph_text(400, count=120)}\n"
            f"Read online: https://u{token}.ct.sendgrid.net/ls/click?upn={token}X9f\n"
            f"Shop the sale: https://shop.example.com/sale?utm_source=nl&uid={token}\n"
            f"Unsubscribe: https://shop.example.com/unsubscribe/{token}\n")
    return make_message(body, sender="news@shop.example.com", subject="Winter sale",
                        message_id=f"<news{number}.{token}@shop.example.com>",
                        headers={"List-Unsubscribe": f"<https://shop.example.com/u/{token}>"})


def test_copies_with_other_tracking_links_are_the_same_newsletter(
        settings: Settings, tmp_path: Path) -> None:
    """Links count by their registrable domain: per-recipient tokens in hosts, paths and
    queries do not make a new message."""
    verdict = run(settings, tmp_path, _newsletter("Jane", "8812731", 1),
                  _newsletter("Jane", "5590142", 2))
    assert verdict.kind == "duplicate", verdict_value(verdict)


def test_a_list_post_from_noreply_follows_the_rules_for_people(
        settings: Settings, tmp_path: Path) -> None:
    """With List-Id the noreply sender is a list, not a program: its copy that lost a
    paragraph is still a near-duplicate; without List-Id the same pair is two reports."""
    text = paragraph_text(410, count=200)
    shorter = "\n".join(text.split("\n")[:-4]) + "\n"

    def post(body: str, number: int, headers: dict[str, str]) -> bytes:
        return make_message(body, sender="noreply@lists.example.org", subject="Announcement",
                            message_id=f"<post{number}@lists.example.org>", headers=headers)

    listed = {"List-Id": "Announcements <announce.lists.example.org>"}
    as_list = run(settings, tmp_path / "list", post(text, 1, listed), post(shorter, 2, listed))
    as_program = run(settings, tmp_path / "program", post(text, 1, {}), post(shorter, 2, {}))
    assert as_list.kind == "near-duplicate", verdict_value(as_list)
    assert as_program.kind == "unique", verdict_value(as_program)


# -- thresholds by sender and subject --------------------------------------------------


def _mixed(keep: float) -> str:
    """A 300-word text whose first ``keep`` share of lines is the base text's."""
    base = paragraph_text(300, count=300).split("\n")
    other = paragraph_text(301, count=300).split("\n")
    cut = int(len(base) * keep)
    return "\n".join(base[:cut] + other[cut:]) + "\n"


def _pair(keep: float, *, sender2: str = "ann@example.org",
          subject2: str = "Plans") -> tuple[bytes, bytes]:
    return (make_message(_mixed(1.0), sender="ann@example.org", subject="Plans",
                         message_id="<p1@x>"),
            make_message(_mixed(keep), sender=sender2, subject=subject2,
                         message_id="<p2@x>"))


def _resemblance(verdict: Verdict) -> float:
    values = [e.resemblance for e in verdict.evidence if e.resemblance is not None]
    assert values, f"no candidate was compared: {verdict_value(verdict)}"
    return max(values)


def test_same_sender_same_subject_uses_the_relaxed_threshold(settings: Settings,
                                                             tmp_path: Path) -> None:
    """A resend with edits, from the same sender under the same subject, is found at
    same_subject_threshold (0.2) where the usual 0.35 would miss it; another sender's
    message equally alike is not; raising the setting in the file moves the decision."""
    first, second = _pair(0.45)
    relaxed = run(settings, tmp_path / "default", first, second)
    assert settings.detector.same_subject_threshold <= _resemblance(relaxed) \
        < settings.detector.resemblance_threshold
    assert relaxed.kind == "near-duplicate", verdict_value(relaxed)
    assert relaxed.evidence[0].note.endswith("(threshold set by: same sender, same subject)")

    other_first, other_second = _pair(0.45, sender2="carl@elsewhere.example.net")
    assert run(settings, tmp_path / "other", other_first, other_second).kind == "unique"

    raised = with_toml(tmp_path, "[detector]\nsame_subject_threshold = 0.35\n")
    assert run(raised, tmp_path / "raised", first, second).kind == "unique"


def test_same_domain_other_subject_uses_the_strict_threshold(settings: Settings,
                                                             tmp_path: Path) -> None:
    """Two messages of one organisation under different subjects share templates and
    signatures: alike as 0.5 they stay unique below other_subject_threshold (0.7), are
    near-duplicates from unrelated senders, and lowering the setting moves the decision."""
    first, second = _pair(0.6, sender2="bob@example.org", subject2="Budget")
    strict = run(settings, tmp_path / "default", first, second)
    assert settings.detector.resemblance_threshold <= _resemblance(strict) \
        < settings.detector.other_subject_threshold
    assert strict.kind == "unique", verdict_value(strict)
    assert "another subject" in strict.evidence[0].note

    other_first, other_second = _pair(0.6, sender2="bob@elsewhere.example.net",
                                      subject2="Budget")
    assert run(settings, tmp_path / "other", other_first,
               other_second).kind == "near-duplicate"

    lowered = with_toml(tmp_path, "[detector]\nother_subject_threshold = 0.4\n")
    assert run(lowered, tmp_path / "lowered", first, second).kind == "near-duplicate"


def test_the_shipped_configuration_file_keeps_the_documented_thresholds() -> None:
    """config/dupfilter.toml states the same values the code defaults to: editing one
    without the other would change decisions silently."""
    shipped = load_settings(Path(__file__).resolve().parents[1] / "config" / "dupfilter.toml")
    defaults = load_settings(search=False)
    for key in ("resemblance_threshold", "same_subject_threshold", "other_subject_threshold",
                "automated_threshold", "compare_identifiers"):
        assert getattr(shipped.detector, key) == getattr(defaults.detector, key), key


def test_compare_identifiers_off_lets_templates_match_again(settings: Settings,
                                                            tmp_path: Path) -> None:
    """The switch is real: with compare_identifiers = false, two notices of one template
    from one company (not a program) are near-duplicates again."""
    def notice(code: str, number: int) -> bytes:
        body = (f"Hello Ann,\n\nYour order {code} has shipped and is on its way to you. "
                "Track it in your account at any time; the carrier updates it every few "
                "hours. If anything is wrong with the parcel when it arrives, answer this "
                "message and our team will sort it out within one working day.\n\n"
                "The Example Shop team\n")
        return make_message(body, sender="orders@shop.example.com", subject="Shipped",
                            message_id=f"<o{number}@shop.example.com>")
    assert run(settings, tmp_path / "on", notice("48213", 1), notice("99120", 2)).kind \
        == "unique"
    off = with_toml(tmp_path, "[detector]\ncompare_identifiers = false\n")
    assert run(off, tmp_path / "off", notice("48213", 1), notice("99120", 2)).kind \
        == "near-duplicate"


# -- short texts: forwards and answers -------------------------------------------------

ORIGINAL = ("On Mon, 30 Nov 2026 at 10:02, Carl Diaz <carl@example.net> wrote:\n"
            "> Can we move the release review to Thursday afternoon? The build farm is\n"
            "> down until Wednesday night and nobody can test the installers before.\n\n"
            "{answer}\n\n{name}\n")


def test_two_people_answering_one_message_alike_stay_unique(settings: Settings,
                                                            tmp_path: Path) -> None:
    """"Fine by me" from Ann and from Bob, both quoting Carl's question: the same
    short text and the same quote, yet two answers (the guard any forward rule must
    keep)."""
    ann, bob = (make_message(ORIGINAL.format(answer="Fine by me, Thursday at three.",
                                             name=""), sender=sender,
                             subject="Re: Release review", message_id=f"<fine{n}@x>",
                             headers={"In-Reply-To": "<question@example.net>"})
                for n, sender in enumerate(("ann@example.org", "bob@example.com")))
    verdict = run(settings, tmp_path, ann, bob)
    assert verdict.kind == "unique", verdict_value(verdict)


def test_a_short_answer_forwarded_to_oneself_is_flagged(settings: Settings,
                                                        tmp_path: Path) -> None:
    """The forwarded block names the original's writer: it is that message again."""
    text = ORIGINAL.format(answer="Fine by me, Thursday at three.", name="Ann")
    original = make_message(text, sender="ann@example.org", to="bob@example.com",
                            subject="Re: Release review", message_id="<fwd1@x>")
    forward = make_message(
        "For the record.\n\n---------- Forwarded message ---------\n"
        "From: Ann Lee <ann@example.org>\nDate: Mon, Nov 30, 2026 at 11:15 AM\n"
        "Subject: Re: Release review\nTo: <bob@example.com>\n\n\n" + text,
        sender="bob@example.com", to="bob@example.com", subject="Fwd: Re: Release review",
        message_id="<fwd2@x>")
    verdict = run(settings, tmp_path, original, forward)
    assert verdict.kind in ("duplicate", "near-duplicate"), verdict_value(verdict)


# -- a short message sent again with its wording corrected --------------------------------

ANSWER = ("Thursday afternoon works for me as well. I will bring the printed checklist and "
          "ask Dana to join us for the installer part.")


def _answer(text: str, *, sender: str = "ann@example.org", number: int = 1) -> bytes:
    return make_message(ORIGINAL.format(answer=text, name="Ann"), sender=sender,
                        subject="Re: Release review", message_id=f"<answer{number}@x>",
                        headers={"In-Reply-To": "<question@example.net>"})


SUITS = ("Thursday afternoon suits me as well. I will bring the printed list and ask Dana to "
         "join us for the whole installer part.")


@pytest.mark.parametrize("again", [
    SUITS,
    "Thursday evening works for me as well. I will print the checklist and ask Dana to join "
    "us for the installer tests.",
], ids=["replaced-deleted-inserted", "replaced-spread"])
def test_a_short_answer_sent_again_with_words_changed_is_flagged(
        settings: Settings, tmp_path: Path, again: str) -> None:
    """Ann sends her 23-word answer again with three or four words changed, spread out:
    no 5-word shingle needs to survive, the words in order do (rule edited-copy)."""
    verdict = run(settings, tmp_path, _answer(ANSWER), _answer(again, number=2))
    assert verdict.kind == "near-duplicate", verdict_value(verdict)
    assert verdict.decided_by == "edited-copy" and verdict.measure == "words"


@pytest.mark.parametrize(("again", "sender"), [
    (SUITS.replace("I will bring", "I will not bring"), "ann@example.org"),
    (SUITS.replace("the printed list", "the 2 printed lists"), "ann@example.org"),
    (SUITS.replace("Thursday", "Friday"), "ann@example.org"),
    (SUITS, "bob@example.com"),
    ("Thursday afternoon is bad for me. I will send the printed checklist instead and ask "
     "Dana to walk you through the installer part.", "ann@example.org"),
], ids=["negation", "number", "day", "another-sender", "another-answer"])
def test_a_short_answer_with_a_fact_changed_stays_unique(
        settings: Settings, tmp_path: Path, again: str, sender: str) -> None:
    """The same edits with a negation added or a number changed, the edited words from
    another person, another answer: two messages."""
    verdict = run(settings, tmp_path, _answer(ANSWER), _answer(again, sender=sender,
                                                                number=2))
    assert verdict.kind == "unique", verdict_value(verdict)


@pytest.mark.parametrize(("before", "after"), [
    ("works for me", "does not work for me"),
    ("Thursday afternoon works", "Friday afternoon works"),
    ("I will bring the printed checklist", "I will bring the printed checklist tomorrow"),
], ids=["negation", "day", "day-added"])
def test_one_fact_changed_in_a_short_answer_is_news_however_alike(
        settings: Settings, tmp_path: Path, before: str, after: str) -> None:
    """One word of fact changed in Ann's 23-word answer leaves most shingles (0.5-0.8
    alike, a near-duplicate before rule facts): the corrected answer must reach the
    reader."""
    verdict = run(settings, tmp_path, _answer(ANSWER),
                  _answer(ANSWER.replace(before, after), number=2))
    assert verdict.kind == "unique", verdict_value(verdict)
    assert any(e.rule == "facts" for e in verdict.evidence)


# -- data only in the subject ----------------------------------------------------------

SHIPPED = ("Good news: your order is on its way. You can follow the parcel in your "
           "account; the carrier updates the status a few times a day until it arrives.\n")
BACKUP = ("Backup finished without errors. All configured folders were copied to the "
          "remote repository, the old archives were pruned and the repository check "
          "passed.\n")


@pytest.mark.parametrize(("body", "senders", "subjects"), [
    (SHIPPED, ("orders@shop.example.com",) * 2,
     ("Your order #1001 has shipped", "Your order #1002 has shipped")),
    (BACKUP, ("root@db01.example.com", "root@db02.example.com"),
     ("Cron <root@db01> /usr/local/bin/backup", "Cron <root@db02> /usr/local/bin/backup")),
], ids=["order-number", "cron-host"])
def test_the_same_body_with_other_data_in_the_subject_is_unique(
        settings: Settings, tmp_path: Path, body: str, senders: tuple[str, str],
        subjects: tuple[str, str]) -> None:
    """The order or host that the notice is about is data, wherever it is written."""
    first, second = (make_message(body, sender=sender, subject=subject,
                                  message_id=f"<subj{n}@x>",
                                  headers=CRON if subject.startswith("Cron") else {})
                     for n, (sender, subject) in enumerate(zip(senders, subjects,
                                                               strict=True)))
    verdict = run(settings, tmp_path, first, second)
    assert verdict.kind == "unique", verdict_value(verdict)
