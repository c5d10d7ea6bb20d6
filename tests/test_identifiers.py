"""The data of a message (mailfilter/identifiers.py): what counts as an identifier, what is
set aside, and how two records' identifiers are compared.

A changed number, code, host or file is new information (issue 13, rule 2); a changed
tracking link is not.  The first tests pin what the extractor reads, the last ones what a
user sees: a notice about another host is unique, the same notice with other links is not.
"""

from __future__ import annotations

import random

import pytest
from helpers import make_message
from hypothesis import given, settings
from hypothesis import strategies as st

from mailfilter.engine import Engine
from mailfilter.headers import verdict_value
from mailfilter.identifiers import (
    EXACT_IDENTIFIERS,
    IDENTIFIER_BITS,
    identifier_difference,
    identifier_hash,
    identifier_summary,
    identifiers,
)

# -- what is an identifier -------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("Your code is 482913.", ["482913"]),
    ("Build failed at commit 9f3e2a7c1b on main", ["9f3e2a7c1b"]),
    ("Primary db-primary.example.org is down", ["db-primary.example.org"]),
    ("Mirror ftp.ftp.example.co.uk answered", ["ftp.ftp.example.co.uk"]),
    ("Rotated /var/log/nginx/access.log tonight", ["/var/log/nginx/access.log"]),
    ("Amount due 49.99 by 2026-12-01", ["49", "99", "2026", "12", "01"]),
])
def test_digits_commits_hosts_and_paths_are_identifiers(text: str, expected: list[str]) -> None:
    """Numbers, commit ids, real host names and file paths are a message's data."""
    assert identifiers(text) == expected


@pytest.mark.parametrize("text", [
    "Please finish the end.Start section of file.tcl and the readme.txt draft.",
    "deadbeef cafebabe abcdefg",          # hexadecimal letters only: words, not commits
    "Thanks for the lovely dinner, see you at the garden party.",
])
def test_words_without_data_give_no_identifiers(text: str) -> None:
    """Dotted words without a real TLD, and hex-looking words without a digit, are prose:
    treating them as data would split two copies of one message after a typo fix."""
    assert identifiers(text) == []


@pytest.mark.parametrize("text", [
    "Track it at https://track.example.com/p/8812739?utm=5531&u=99812",
    "Unsubscribe: http://list.example.org/u/7f3a9c2e1d",
    "Shop now at www.shop-example.com/sale/2026",
    "Write to ann.lee42@example.org or support+9931@example.com",
    "HTTP://EXAMPLE.ORG/A/123 WWW.EXAMPLE.NET/456",
])
def test_links_and_addresses_are_set_aside(text: str) -> None:
    """Tracking tokens and per-recipient codes live in URLs and addresses: they differ
    between copies of one newsletter and must not count as data."""
    assert identifiers(text) == []


def test_link_tokens_do_not_hide_the_data_of_the_same_line() -> None:
    """Only the words that are links go: the order number on the same line stays."""
    assert identifiers("Order 55120 https://shop.example.com/o/99887766 shipped") == ["55120"]


@pytest.mark.parametrize(("text", "expected"), [
    ("web03 is down", ["03"]),
    ("Invoice INV-0042", ["0042"]),
    ("Backup at 10:30", ["10", "30"]),
    ("at 23:59:07", ["23", "59", "07"]),
])
def test_a_word_with_digits_counts_by_its_digits(text: str, expected: list[str]) -> None:
    """"web03" is 03 and "10:30" is 10 and 30: punctuation splits numbers, letters around
    digits do not make new data."""
    assert identifiers(text) == expected


def test_repeated_values_are_counted() -> None:
    """A report where one of two equal figures changed differs: the second 39 is 39#2."""
    assert identifiers("used 39 of 39 GB") == ["39", "39#2"]
    same = identifiers("used 39 of 39 GB")
    changed = identifiers("used 39 of 40 GB")
    assert set(same) != set(changed)
    assert "39#2" in same and "39#2" not in changed


@pytest.mark.parametrize("subject", [
    "Re: Fwd: AW: WG: SV: TR: VS: [users] [Announce] Release 7",
    "RE:  [users]   FWD: Release 7",
    "Re[2]: Release 7",
])
def test_subject_tags_and_reply_prefixes_are_removed(subject: str) -> None:
    """List tags and reply prefixes carry no data; the number in the subject does."""
    assert identifiers("", subject) == ["7"]


def test_a_subject_tag_with_a_number_names_the_ticket_and_stays() -> None:
    """"[Ticket #27271]" tells two tickets apart: its number is data."""
    assert identifiers("", "[Ticket #27271] Printer broken") == ["27271"]


def test_subject_identifiers_come_before_the_text() -> None:
    """Subject and body both count, the subject first (in order of appearance)."""
    assert identifiers("Disk 91% full", "Alert 7 on web03") == ["7", "03", "91"]


# -- summaries and their comparison ----------------------------------------------------


def _tokens(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [str(rng.randrange(10**9)) for _ in range(count)]


def test_a_few_identifiers_are_kept_as_exact_hashes() -> None:
    """Up to EXACT_IDENTIFIERS different values a record keeps their sorted hashes."""
    tokens = _tokens(EXACT_IDENTIFIERS)
    hashes, bits = identifier_summary(tokens + tokens[:5])       # repeats count once
    assert bits == b""
    assert hashes == tuple(sorted({identifier_hash(t) for t in tokens}))
    assert len(hashes) == EXACT_IDENTIFIERS


def test_many_identifiers_switch_to_a_bit_map() -> None:
    """One more value than EXACT_IDENTIFIERS and the record keeps a 1024-bit map instead,
    with exactly the bits of its values set."""
    tokens = _tokens(EXACT_IDENTIFIERS + 1)
    hashes, bits = identifier_summary(tokens)
    assert hashes == ()
    assert len(bits) == IDENTIFIER_BITS // 8 == 128
    value = int.from_bytes(bits, "big")
    expected = 0
    for token in tokens:
        expected |= 1 << (identifier_hash(token) % IDENTIFIER_BITS)
    assert value == expected


@pytest.mark.parametrize("words", [
    ["a1"],                                         # one value, counted: 1, 1#2, 1#3 …
    ["2024-01-02", "09:30", "ok", "web03"],
    [str(number) for number in range(3000)],        # distinct values
    ["4f2a9c1e", "host7.example.org", "/var/log/x1", "order", "88"],
])
@pytest.mark.parametrize("subject", ["", "Report 88 for 1", "Re: 1 1 1 2024"])
def test_a_long_report_is_read_in_rounds_to_the_same_record(
        monkeypatch: pytest.MonkeyPatch, words: list[str], subject: str) -> None:
    """A text of very many values is numbered a round at a time and no further once they
    fill the summary's bit map (a crafted 4 MiB of "a1 " took 453 MB as a list of 1.4
    million strings): the record — the summary and the first 64 names — is the one the
    whole list gives, and a subject value is still counted against the whole text."""
    import mailfilter.identifiers as module
    rng = random.Random(len(words))
    text = " ".join(rng.choice(words) for _ in range(40_000)) + " 1 88 2024"
    monkeypatch.setattr(module, "_ROUND", 10**9)            # read the whole list at once
    whole = identifiers(text, subject)
    monkeypatch.setattr(module, "_ROUND", 512)
    rounds = identifiers(text, subject)
    assert identifier_summary(rounds) == identifier_summary(whole)
    assert rounds[:64] == whole[:64]
    assert rounds == whole[:len(rounds)]
    # Cut short only where the map was full: 40,000 values set all 1,024 bits.
    assert len(rounds) < len(whole) == len(set(whole))
    assert identifier_summary(rounds)[1] == b"\xff" * (IDENTIFIER_BITS // 8)


def test_no_identifiers_summarise_to_nothing() -> None:
    """A message without data keeps neither hashes nor a map."""
    assert identifier_summary([]) == ((), b"")


def test_exact_comparison_names_the_values_that_differ() -> None:
    """With hashes on both sides the difference is exact, each way."""
    ours = ["482913", "10", "02"]
    theirs = ["119384", "10", "02"]
    a, _ = identifier_summary(ours)
    b, _ = identifier_summary(theirs)
    missing, ours_extra, theirs_extra = identifier_difference(a, b"", b, b"")
    assert (ours_extra, theirs_extra) == (True, True)
    assert [t for t in ours if missing(t)] == ["482913"]
    assert identifier_difference(a, b"", a, b"")[1:] == (False, False)
    # A subset: only one side has more.
    c, _ = identifier_summary(ours[1:])
    assert identifier_difference(c, b"", a, b"")[1:] == (False, True)


@pytest.mark.parametrize(("ours_count", "theirs_count"), [(200, 200), (10, 200), (200, 10)])
def test_bit_maps_never_invent_a_difference(ours_count: int, theirs_count: int) -> None:
    """The same values on both sides, or one side's values all within the other's, never
    read as "we have one they lack" — with a map on either side or both."""
    base = _tokens(max(ours_count, theirs_count), seed=3)
    ours, theirs = base[:ours_count], base[:theirs_count]
    a_hashes, a_bits = identifier_summary(ours)
    b_hashes, b_bits = identifier_summary(theirs)
    missing, ours_extra, theirs_extra = identifier_difference(a_hashes, a_bits,
                                                              b_hashes, b_bits)
    # Never invented: a side whose values all occur on the other has nothing extra.
    # Found: 190 extra values cannot all fall on bits the other side has set.
    assert ours_extra is (ours_count > theirs_count)
    assert theirs_extra is (theirs_count > ours_count)
    assert not any(missing(t) for t in base[:min(ours_count, theirs_count)])


def test_bit_map_finds_a_changed_value_that_sets_a_new_bit() -> None:
    """A long report in which one figure changed differs, when the new figure's bit is not
    already set by another value (the docstring's "sometimes missed" is only that)."""
    report = _tokens(200, seed=5)
    candidates = (str(n) for n in range(10**6, 10**6 + 1000))
    bits_of = {identifier_hash(t) % IDENTIFIER_BITS for t in report}
    new_value = next(c for c in candidates
                     if identifier_hash(c) % IDENTIFIER_BITS not in bits_of)
    changed = report[:-1] + [new_value]
    old_bit = identifier_hash(report[-1]) % IDENTIFIER_BITS
    assert old_bit not in {identifier_hash(t) % IDENTIFIER_BITS for t in changed}, \
        "pick another seed: the dropped value's bit is still set by another value"
    a = identifier_summary(changed)
    b = identifier_summary(report)
    missing, ours_extra, theirs_extra = identifier_difference(*a, *b)
    assert ours_extra and theirs_extra
    assert missing(new_value) and not missing(report[0])


def test_mixed_summaries_compare_through_the_map() -> None:
    """Hashes on one side, a map on the other: a value only we have is still found."""
    long_report = _tokens(100, seed=8)
    short = long_report[:5]
    short_hashes, _ = identifier_summary(short)
    long_hashes, long_bits = identifier_summary(long_report)
    assert long_bits and short_hashes
    _, ours_extra, theirs_extra = identifier_difference(short_hashes, b"", (), long_bits)
    assert (ours_extra, theirs_extra) == (False, True)


# -- end to end: what the user sees ----------------------------------------------------


def _alert(host: str, number: int, *, link: str = "https://monitor.example.com/a/1",
           value: str = "97") -> bytes:
    body = (f"PROBLEM: disk usage on {host} is {value}% (threshold 90%).\n\n"
            "The root file system is filling up; check the largest directories, rotate "
            "old logs and remove stale release folders before the service stops writing. "
            "This alert repeats every hour while the problem lasts.\n\n"
            f"Details: {link}\n\nYour monitoring team\n")
    return make_message(body, sender="alerts@monitor.example.com",
                        subject="Disk usage warning", message_id=f"<al{number}@x>")


@pytest.mark.parametrize("other_host", ["db-2.prod.example.com", "web04.example.net"])
def test_the_same_alert_for_another_host_is_unique(engine: Engine, other_host: str) -> None:
    """One template, another host: the postmaster must see both alerts."""
    engine.check(_alert("db-1.prod.example.com", 1))
    verdict = engine.check(_alert(other_host, 2))
    assert verdict.kind == "unique", verdict_value(verdict)
    assert verdict.evidence[0].rule == "identifiers"
    assert other_host in verdict.evidence[0].note


@pytest.mark.parametrize("tld", ["pt", "mx", "gr", "za", "me"])
def test_hosts_under_any_country_domain_are_identifiers(engine: Engine, tld: str) -> None:
    """Which country a company registered in must not decide whether its alerts merge."""
    engine.check(_alert(f"db-primary.example.{tld}", 1))
    verdict = engine.check(_alert(f"db-replica.example.{tld}", 2))
    assert verdict.kind == "unique", verdict_value(verdict)


def test_the_same_alert_with_another_figure_is_unique(engine: Engine) -> None:
    """Only the percentage changed: new information."""
    engine.check(_alert("db-1.prod.example.com", 1, value="97"))
    verdict = engine.check(_alert("db-1.prod.example.com", 2, value="98"))
    assert verdict.kind == "unique", verdict_value(verdict)
    assert any("98" in e.note for e in verdict.evidence), [e.note for e in verdict.evidence]


def test_the_same_alert_with_another_tracking_link_is_flagged(engine: Engine) -> None:
    """Links are set aside: the copy with another tracking token is the same alert."""
    engine.check(_alert("db-1.prod.example.com", 1,
                        link="https://monitor.example.com/a/8812?t=f00ba4"))
    verdict = engine.check(_alert("db-1.prod.example.com", 2,
                                  link="https://monitor.example.com/a/9931?t=77aa01"))
    assert verdict.kind in ("duplicate", "near-duplicate"), verdict_value(verdict)


def test_a_report_about_another_file_is_unique(engine: Engine) -> None:
    """Which file a report is about is its data too."""
    def report(path: str, number: int) -> bytes:
        body = (f"Log rotation failed for {path}: permission denied while renaming the "
                "current file. The old file was kept and nothing was compressed tonight. "
                "Please check the owner and the mode of the folder, then run logrotate by "
                "hand with the verbose flag to see the whole error.\n")
        return make_message(body, sender="ops@ops.example.org", subject="logrotate failed",
                            message_id=f"<lr{number}@x>")
    engine.check(report("/var/log/nginx/access.log", 1))
    verdict = engine.check(report("/var/log/nginx/error.log", 2))
    assert verdict.kind == "unique", verdict_value(verdict)
    assert verdict.evidence[0].rule == "identifiers"
    assert "/var/log/nginx/error.log" in verdict.evidence[0].note


def test_a_ci_failure_on_another_commit_is_unique(engine: Engine) -> None:
    """The same failing job on the next commit is a new failure to look at; the same
    commit's notice sent again is not."""
    def failure(commit: str, number: int) -> bytes:
        body = (f"Run failed: tests - main ({commit})\n\nThe workflow 'tests' failed on "
                f"branch main at commit {commit} pushed by ann. The job 'unit' exited with "
                "an error in the step 'Run the test suite'. View the logs of the run to see "
                "which test failed, then push a fix or re-run the jobs.\n")
        return make_message(body, sender="builds@ci.example.com",
                            subject="Run failed: tests - main", message_id=f"<ci{number}@x>")
    engine.check(failure("3f9a2c1e7b", 1))
    other = engine.check(failure("8d41b0ac29", 2))
    again = engine.check(failure("8d41b0ac29", 3))
    assert other.kind == "unique", verdict_value(other)
    assert "8d41b0ac29" in other.evidence[0].note
    assert again.kind == "duplicate"


def test_a_campaign_token_at_the_end_of_a_subject_is_no_identifier() -> None:
    """Before: "13986" after "Boss!!", a random "k83jf02x" and a padded number in front
    were the subject's data, so one campaign's copies differed in their identifiers."""
    assert identifiers("", "Be Your Own Boss!! 13986") == []
    assert identifiers("", "Earn money from home k83jf02x") == []
    assert identifiers("", "48213        Hot stock alert") == []
    # labelled values, hosts and commit ids are data
    assert identifiers("", "Build 1235 failed") == ["1235"]
    assert identifiers("", "Your order no. 5512") == ["5512"]
    assert identifiers("", "Alert on web03") == ["03"]
    assert identifiers("", "Pipeline failed for 4f2a9c1") == ["4f2a9c1"]
    assert identifiers("", "Time:6:25:49 PM") == ["6", "25", "49"]


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(["a", "Z", "0", "9", "-", ".", "_", "#", "/", " ", "\n", "\t",
                                 "é", "K", "com", "org", ".com", ".de", "example", "xn--",
                                 "localdomain", "web03", "XXXXXXXX"]), max_size=60),
       st.integers(0, 40))
def test_host_names_found_where_a_label_starts_are_those_found_anywhere(
        pieces: list[str], host_max: int) -> None:
    """Host names are searched for only where a label starts (inside a run of letters
    and digits each place read the run again: 0.8 s a MB of link sites after a run of
    capitals): the same names, and the same text left, as searching from every place,
    also where a shorter look-back window cuts a run."""
    import mailfilter.identifiers as module
    text = "".join(pieces)
    saved = module._HOST_MAX
    module._HOST_MAX = host_max or saved
    try:
        found: list[str] = []
        left = module._take_hosts(text, found)
        at_label = module._HOST_AT_LABEL
        module._HOST_AT_LABEL = module._HOST          # search from every place
        try:
            everywhere: list[str] = []
            assert module._take_hosts(text, everywhere) == left
            assert everywhere == found
        finally:
            module._HOST_AT_LABEL = at_label
    finally:
        module._HOST_MAX = saved
