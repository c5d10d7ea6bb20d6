"""``[detector] aliases`` (mailfilter/aliases.py): several addresses of one person are one
recipient, and a file the filter cannot read says where it is wrong.

With recipient scope a newsletter sent to ``jane@`` and again to ``j.doe@`` is a duplicate
only if dupfilter knows they are one mailbox (issue 13: 0 of 40 flagged).  A mistake in the
file must be reported with its file and line, as Postfix's own tables are.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import make_message, paragraph_text
from support import cli

from mailfilter.aliases import load_aliases
from mailfilter.config import ConfigError, Settings
from mailfilter.engine import Engine

NEWSLETTER = paragraph_text(90, count=150)


def write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "aliases"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# -- the file --------------------------------------------------------------------------


def test_comments_blank_lines_and_postfix_spellings_are_read(tmp_path: Path) -> None:
    """virtual(5) style: '#' comments (also after an entry), blank lines, tabs, a colon,
    angle brackets, any case, CRLF line ends."""
    path = write(tmp_path, "# alias                mailbox\n\n"
                           "j.doe@example.org      jane@example.org\n"
                           "   # indented comment\n"
                           "Jane.Doe@Example.COM:\t<Jane@Example.org>   # old address\r\n"
                           "\tjd@example.net\tjane@example.org\r\n\n")
    assert load_aliases(str(path)) == {"j.doe@example.org": "jane@example.org",
                                       "jane.doe@example.com": "jane@example.org",
                                       "jd@example.net": "jane@example.org"}


def test_chains_lead_to_the_last_mailbox_and_cycles_stop(tmp_path: Path) -> None:
    """a → b → c is a → c; a cycle does not hang the filter."""
    chain = write(tmp_path, "a@x.org b@x.org\nb@x.org c@x.org\n")
    assert load_aliases(str(chain)) == {"a@x.org": "c@x.org", "b@x.org": "c@x.org"}
    cycle = write(tmp_path, "a@x.org b@x.org\nb@x.org c@x.org\nc@x.org a@x.org\n")
    mapped = load_aliases(str(cycle))
    assert set(mapped) == {"a@x.org", "b@x.org", "c@x.org"}
    assert len(set(mapped.values())) == 1      # one person, whichever name is kept


def test_no_file_configured_means_no_aliases() -> None:
    """The default (an empty setting) is no map, not an error."""
    assert load_aliases("") == {}


@pytest.mark.parametrize(("text", "line"), [
    ("# ok\n\nj.doe@example.org jane@example.org, joe@example.org\n", 3),   # two targets
    ("j.doe@example.org jane@example.org joe@example.org\n", 1),
    ("a@x.org b@x.org\nj.doe@example.org\n", 2),                            # no mailbox
    ("@example.org jane@example.org\n", 1),                                 # catch-all
    ("j.doe@example.org jane\n", 1),                                        # local user
    ("a@x.org b@x.org\n    c@x.org\n", 2),                                  # continuation
])
def test_lines_that_are_not_alias_mailbox_are_refused_with_file_and_line(
        tmp_path: Path, text: str, line: int) -> None:
    """Several targets, one address, a Postfix catch-all or local user: a ConfigError
    naming the file, the line and what was found there."""
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as caught:
        load_aliases(str(path))
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: ")
    wrong = [ln for ln in text.splitlines() if ln.strip()][-1].strip()
    assert repr(wrong) in message


def test_a_regexp_table_line_is_refused(tmp_path: Path) -> None:
    """A line copied from a regexp: or pcre: table is not an address; say so."""
    path = write(tmp_path, "/^j.*@example.org$/ jane@example.org\n")
    with pytest.raises(ConfigError, match=r":1: "):
        load_aliases(str(path))


def test_a_file_saved_with_a_byte_order_mark_is_read(tmp_path: Path,
                                                     settings: Settings) -> None:
    """An editor's BOM must not silently disable the first line."""
    settings.detector.aliases = str(write(tmp_path, "\ufeffj.doe@example.org "
                                                    "jane@example.org\n"))
    with Engine(settings, str(tmp_path / "store")) as engine:
        engine.check(newsletter(1), ["jane@example.org"])
        second = engine.check(newsletter(2), ["j.doe@example.org"])
    assert second.kind == "duplicate"


def test_a_missing_or_unreadable_file_is_a_clear_error(tmp_path: Path) -> None:
    """Missing, a folder, or not UTF-8: a ConfigError that names the path."""
    for path, why in ((tmp_path / "missing", "No such file"),
                      (tmp_path, "Is a directory"),
                      (write(tmp_path, b"a@x.org b@x.org\n\xff\xfe\n"), "not UTF-8")):
        with pytest.raises(ConfigError) as caught:
            load_aliases(str(path))
        assert str(caught.value).startswith(f"{path}: ") and why in str(caught.value)


def test_the_engine_refuses_to_open_with_a_broken_aliases_file(
        tmp_path: Path, settings: Settings) -> None:
    """Opening fails, naming the line, rather than mis-scoping every message."""
    settings.detector.aliases = str(write(tmp_path, "jane@example.org\n"))
    with pytest.raises(ConfigError, match=r"aliases:1: expected ALIAS MAILBOX"):
        Engine(settings, str(tmp_path / "store"))


# -- end to end ------------------------------------------------------------------------


def newsletter(number: int) -> bytes:
    return make_message(NEWSLETTER, sender="news@shop.example.com", subject="Weekly deals",
                        message_id=f"<nl{number}@shop.example.com>")


def test_without_aliases_two_addresses_are_two_people(tmp_path: Path,
                                                      settings: Settings) -> None:
    """The control: recipient scope alone keeps a second address's copy."""
    with Engine(settings, str(tmp_path / "store")) as engine:
        engine.check(newsletter(1), ["jane@example.org"])
        second = engine.check(newsletter(2), ["j.doe@example.org"])
    assert second.kind == "unique"


def test_two_addresses_of_one_person_are_one_recipient(tmp_path: Path,
                                                       settings: Settings) -> None:
    """Jane's second copy (to her alias, or to an alias of an alias) is a duplicate;
    Carl, who is nobody's alias, still gets his."""
    settings.detector.aliases = str(write(tmp_path, "j.doe@example.org jane@example.org\n"
                                                    "jd@example.net j.doe@example.org\n"))
    with Engine(settings, str(tmp_path / "store")) as engine:
        engine.check(newsletter(1), ["jane@example.org"])
        carl = engine.check(newsletter(2), ["carl@example.org"])
        alias = engine.check(newsletter(3), ["<J.Doe@Example.org>"])
        chained = engine.check(newsletter(4), ["jd@example.net"])
    assert carl.kind == "unique"
    assert alias.kind == "duplicate" and alias.recipients_seen == ("<J.Doe@Example.org>",)
    assert chained.kind == "duplicate"


def test_two_aliases_of_a_mailbox_nobody_writes_to_are_one_recipient(
        tmp_path: Path, settings: Settings) -> None:
    """Both addresses map to a third one: the first copy makes the second a duplicate."""
    settings.detector.aliases = str(write(tmp_path, "sales@example.org jane@example.org\n"
                                                    "info@example.org jane@example.org\n"))
    with Engine(settings, str(tmp_path / "store")) as engine:
        engine.check(newsletter(1), ["sales@example.org"])
        second = engine.check(newsletter(2), ["info@example.org"])
    assert second.kind == "duplicate"


def test_mixed_envelope_only_the_person_who_had_it_is_seen(tmp_path: Path,
                                                           settings: Settings) -> None:
    """To Jane's alias and to Carl: a duplicate for Jane only, so Carl keeps his copy."""
    settings.detector.aliases = str(write(tmp_path, "j.doe@example.org jane@example.org\n"))
    with Engine(settings, str(tmp_path / "store")) as engine:
        engine.check(newsletter(1), ["jane@example.org"])
        both = engine.check(newsletter(2), ["j.doe@example.org", "carl@example.org"])
    assert both.kind == "duplicate"
    assert both.recipients_seen == ("j.doe@example.org",)
    assert not both.all_recipients_seen


def _config(tmp_path: Path, aliases: Path) -> Path:
    config = tmp_path / "dupfilter.toml"
    config.write_text(f'[detector]\naliases = "{aliases}"\n', encoding="utf-8")
    return config


@pytest.mark.skipif(not cli.installed(), reason="dupfilter console scripts not installed")
def test_the_filter_reads_the_aliases_setting_of_its_config(tmp_path: Path) -> None:
    """As a user runs it: the second address's copy is tagged duplicate."""
    config = _config(tmp_path, write(tmp_path, "j.doe@example.org jane@example.org\n"))
    db = tmp_path / "db"
    first = cli.tag(db, newsletter(1), "--config", str(config), "--recipient",
                    "jane@example.org")
    second = cli.tag(db, newsletter(2), "--config", str(config), "--recipient",
                     "j.doe@example.org")
    assert b"X-Dupfilter: unique" in first.stdout, first.stderr
    assert b"X-Dupfilter: duplicate" in second.stdout, second.stderr


@pytest.mark.skipif(not cli.installed(), reason="dupfilter console scripts not installed")
def test_the_filter_names_file_and_line_of_a_broken_aliases_file(tmp_path: Path) -> None:
    """The message goes through unchecked (never lost) and stderr says what to fix."""
    aliases = write(tmp_path, "# aliases\nj.doe@example.org jane@example.org, joe@x.org\n")
    result = cli.tag(tmp_path / "db", newsletter(1), "--config",
                     str(_config(tmp_path, aliases)), "--recipient", "jane@example.org")
    assert result.returncode == 0
    assert result.stdout == newsletter(1)
    assert f"{aliases}:2: expected ALIAS MAILBOX".encode() in result.stderr


@pytest.mark.skipif(not cli.installed(), reason="dupfilter console scripts not installed")
def test_config_check_reports_a_broken_aliases_file(tmp_path: Path) -> None:
    """The pre-reload check a postmaster runs must catch what the daemons refuse."""
    aliases = write(tmp_path, "j.doe@example.org\n")
    result = cli.run(cli.DUPFILTER_DB, "--config", str(_config(tmp_path, aliases)),
                     "config", "--check")
    assert result.returncode != 0
    assert f"{aliases}:1:".encode() in result.stdout + result.stderr
