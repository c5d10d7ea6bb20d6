"""Settings: the commented example file is the code's defaults; errors name key and line."""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path

import pytest

from mailfilter.config import (
    ConfigError,
    Refused,
    Settings,
    check_milter_settings,
    check_socket_group,
    check_store_location,
    load_settings,
    parse_duration,
    parse_milter_socket,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "config" / "dupfilter.toml"


def test_example_file_parses_and_equals_the_defaults() -> None:
    from_file = asdict(load_settings(EXAMPLE))
    defaults = asdict(Settings())
    from_file.pop("source")
    defaults.pop("source")
    assert from_file == defaults


def test_example_file_documents_every_key() -> None:
    text = EXAMPLE.read_text()
    for section, values in asdict(Settings()).items():
        if section == "source":
            continue
        assert f"[{section}]" in text
        for key, value in values.items():
            if isinstance(value, dict):
                for sub in value:
                    assert f"\n{sub.replace('_', '-')} = " in text or f"\n{sub} = " in text
            else:
                assert f"\n{key} = " in text, f"{section}.{key} is not documented"


def test_empty_file_means_defaults(tmp_path: Path) -> None:
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    assert asdict(load_settings(empty))["detector"] == asdict(Settings())["detector"]


@pytest.mark.parametrize("content, expected", [
    ("[detector]\nresemblance_treshold = 0.4\n", "2: unknown key detector.resemblance_treshold"),
    ("[detector]\nscope = \"everyone\"\n", "2: detector.scope must be"),
    ("[detector]\nhistogram_candidates = 0\n",
     "2: detector.histogram_candidates must be at least 1"),
    ("[fingerprint]\nngram = \"five\"\n", "2: fingerprint.ngram must be int"),
    ("[milter.actions]\nduplicate = \"explode\"\n", "2: milter.actions.duplicate must be one of"),
    ("[store]\nretention = \"forever\"\n", "2: store.retention"),
    ("[detector\n", "Expected"),
    ("[policy]\nrules = [{ field = \"subject\", pattern = \"x\" }]\n",
     "2: policy.rules[1] (rule1): field must be one of"),
    ("[policy]\nrules = [{ field = \"from\", pattern = \"(\" }]\n", "bad pattern"),
    ("[log]\nlevel = \"verbose\"\n", "2: log.level must be one of"),
    ("\n[log]\ntarget = \"stderr\"\nlevel = \"WARNING\"\n[detector]\nscope = 1\n",
     "6: detector.scope must be str"),
    # Values that cannot be what was meant (issue 14): each names the value, the form, an
    # example.
    ("[milter.actions]\nnear_duplicate = \"tag\"\nnear-duplicate = \"reject\"\n",
     "bad.toml:2 and BAD:3: milter.actions.near_duplicate and "
     "milter.actions.near-duplicate are the same setting; keep one of them"),
    ("[store]\nretention = \"30\"\n",
     "2: store.retention = '30' has no unit; expected a number with a unit s, m, h, d or w, "
     "e.g. 30d"),
    ("[store]\nretention = \"0d\"\n", "2: store.retention = '0d' is no time at all"),
    ("[store]\nfile_mode = \"0400\"\n",
     "2: store.file_mode = '0400' does not let the owner read and write"),
    ("[store]\nfile_mode = \"rw-------\"\n",
     "2: store.file_mode = 'rw-------' is not an octal mode; expected an octal mode in "
     "quotes, as for chmod, e.g. 0600"),
    ("[store]\npath = \"redis:/127.0.0.1:6379\"\n",
     "2: store.path = 'redis:/127.0.0.1:6379' looks like a URL (redis:) but is none "
     "dupfilter reads"),
    ("[store]\npath = \"redis//cache.example.net\"\n", "with its colon missing"),
    ("[store]\npath = \"redis://:hunter2@cache.example.net:99999/0\"\n",
     "2: store.path = 'redis://:***@cache.example.net:99999/0' is not a valid URL"),
    ("[store]\npath = \"redis://cache.example.net/zero\"\n",
     "has '/zero' where the database number goes"),
    ("[store]\npath = \"~/.local/state/dupfilter\"\n", "starts with ~, which is not expanded"),
    ("[store]\npath = \"dupfilter-store\"\n", "is a relative path"),
    ("[store]\ntimeout = 0\n", "2: store.timeout must be more than 0"),
    ("[fingerprint]\nchunk_average = 64\n", "2: fingerprint.chunk_average must be 256.."),
    ("[detector]\nattachment_threshold = 1.5\n",
     "2: detector.attachment_threshold must be in (0, 1]"),
    ("[detector]\nhistogram_max_positions = 40\n",
     "2: detector.histogram_max_positions must be 0..36"),
    ("[detector]\nposting_cap = 0\n", "2: detector.posting_cap must be at least 1"),
    # Misspelt names (issue 20 item 5): the line, and the name meant (it said ':?:' for a
    # section, and never what was meant).
    ("# site\n\n[detectr]\nscope = \"global\"\n",
     "bad.toml:3: unknown section [detectr]; did you mean [detector]?"),
    ("[milter.actoins]\nduplicate = \"tag\"\n",
     "bad.toml:1: unknown section [milter.actoins]; did you mean [milter.actions]?"),
    ("[milter]\nactions.duplicat = \"tag\"\n",
     "bad.toml:2: unknown key milter.actions.duplicat; did you mean "
     "milter.actions.duplicate?"),
    ("[detector]\nmin_words = 3\nresemblence_threshold = 0.3\n",
     "bad.toml:3: unknown key detector.resemblence_threshold; did you mean "
     "detector.resemblance_threshold?"),
    ("[store]\nscope = \"global\"\n",
     "bad.toml:2: unknown key store.scope; scope is a key of [detector]"),
    ("[detector]\nmin_words = = 3\n",
     "bad.toml:2: not valid TOML: Invalid value (column 13)"),
    ("[detector]\nstoplist = [\"a\",\n\"b\"\n",
     "bad.toml:3: not valid TOML: Unclosed array (at the end of the file)"),
    ("# M\u00fcller's site\n[store]\n".encode("latin-1").decode("utf-8", "surrogateescape"),
     "bad.toml:1: not UTF-8 (byte 0xfc at column 4); save the file as UTF-8"),
])
def test_bad_values_name_the_key_and_line(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_bytes(content.encode("utf-8", "surrogateescape"))
    with pytest.raises(ConfigError) as error:
        load_settings(path)
    message = str(error.value).replace(f"{path}:", "bad.toml:", 1).replace(f"{path}:", "BAD:")
    assert str(path) in str(error.value) and expected in message, message
    assert "\n" not in str(error.value)                                   # one line


def test_durations() -> None:
    assert parse_duration("30d") == 30 * 86400
    assert parse_duration("12h") == 43200
    assert parse_duration("90m") == 5400
    with pytest.raises(ValueError):
        parse_duration("soon")


def test_show_names_where_each_setting_came_from(tmp_path: Path) -> None:
    import subprocess
    config = tmp_path / "site.toml"
    config.write_text('[detector]\nscope = "global"\n\n[milter.actions]\nduplicate = "reject"\n'
                      '\n[smtpd.actions]\nduplicate = "discard"\n')
    shown = subprocess.run(["dupfilter-db", "--config", str(config), "--db", "/tmp/x",
                            "config", "--show"], capture_output=True, text=True).stdout
    assert f'scope = "global"  # {config}:2' in shown
    assert f'actions.duplicate = "reject"  # {config}:5' in shown
    assert f'actions.duplicate = "discard"  # {config}:8' in shown
    assert 'resemblance_threshold = 0.35  # default' in shown
    assert 'path = "/tmp/x"  # --db' in shown


def test_search_order(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    from mailfilter.config import find_config
    user = tmp_path / "xdg" / "dupfilter" / "dupfilter.toml"
    user.parent.mkdir(parents=True)
    user.write_text("")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("DUPFILTER_CONFIG", raising=False)
    assert find_config() == user
    monkeypatch.setenv("DUPFILTER_CONFIG", str(tmp_path / "env.toml"))
    assert find_config() == tmp_path / "env.toml"
    assert find_config("explicit.toml") == Path("explicit.toml")


@pytest.mark.parametrize("content, expected", [
    ('[smtpd.actions]\nduplicate = "reject"\n',
     ':2: smtpd.actions.duplicate = "reject" needs smtpd.mode = "proxy"'),
    ('[milter]\nsocket = "/run/dupfilter/milter.sock"\n',
     ":2: milter.socket = '/run/dupfilter/milter.sock' has no type; expected inet:PORT@HOST, "
     "Postfix's inet:HOST:PORT, inet6:PORT@IPV6, inet:[IPV6]:PORT, unix:/PATH or "
     "local:/PATH, e.g. unix:/run/dupfilter/milter.sock"),
    ('[milter]\nsocket = "inet:99999@127.0.0.1"\n',
     ":2: milter.socket = 'inet:99999@127.0.0.1' has port 99999, outside 1-65535"),
    ('[milter]\nsocket = "inet:127.0.0.1:0"\n', "has port 0, outside 1-65535"),
    ('[milter]\nsocket = "inet:8890"\n',
     ":2: milter.socket = 'inet:8890' names no host: libmilter would listen on every "
     "interface; for loopback write inet:8890@127.0.0.1, for every interface say so with "
     "inet:8890@0.0.0.0"),
    ('[milter]\nsocket = "inet:127.1:8890"\n', "'127.1', which is no IPv4 address"),
    ('[milter]\nsocket = "unix:milter.sock"\n', "'unix:milter.sock' is not an absolute path"),
    ('[milter]\nsocket_mode = "660"\ntimeout = -1\n', ":3: milter.timeout = -1 must be 0"),
    ('[milter]\nsocket_mode = "u=rw"\n', ":2: milter.socket_mode = 'u=rw' is not an octal"),
    ('[smtpd]\nlisten = "localhost"\n',
     ":2: smtpd.listen = 'localhost' is not HOST:PORT; expected HOST:PORT or [IPV6]:PORT "
     "with a port from 1 to 65535, e.g. 127.0.0.1:10025"),
    ('[smtpd]\nlisten = ":10025"\n', "':10025' names no host"),
    ('[smtpd]\nlisten = "::1:10025"\n', "an IPv6 address needs brackets"),
    ('[smtpd]\nlisten = "127.0.0.1:0"\n', "has port 0, outside 1-65535"),
    ('[smtpd]\nnext_hop = "127.0.0.1:99999"\n',
     "smtpd.next_hop = '127.0.0.1:99999' has port 99999, outside 1-65535; expected "
     "HOST:PORT or [IPV6]:PORT with a port from 1 to 65535, e.g. 127.0.0.1:10026"),
    ('[smtpd]\nmax_message_bytes = -1\n', ":2: smtpd.max_message_bytes must be 0"),
    ('[metrics]\nlisten = "127.0.0.1:99999"\n', ":2: metrics.listen = '127.0.0.1:99999' "
     "has port 99999, outside 1-65535; expected HOST:PORT or [IPV6]:PORT with a port from 1 "
     "to 65535, e.g. 127.0.0.1:9464"),
    ('[metrics]\nlisten = "*:9464"\n', "'*', which is no host name"),
])
def test_config_check_finds_what_a_daemon_would_refuse(tmp_path: Path, content: str,
                                                       expected: str) -> None:
    """`config --check` must not say "valid" for a file a daemon then refuses to start
    with; the pipe filter, which has no such section to run, still accepts the file."""
    import subprocess
    path = tmp_path / "site.toml"
    path.write_text(content)
    checked = subprocess.run(["dupfilter-db", "--config", str(path), "config", "--check"],
                             capture_output=True, text=True)
    assert checked.returncode == 2 and expected in checked.stderr, checked
    assert "valid" not in checked.stdout
    load_settings(path)                       # still loads: dupfilter --tag keeps working


def test_smtpd_reload_says_a_changed_mode_needs_a_restart(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import argparse
    import logging

    from mailfilter.smtpd.server import _settings_loader
    path = tmp_path / "site.toml"
    path.write_text('[smtpd]\nmode = "proxy"\n')
    running = load_settings(path)
    path.write_text('[smtpd]\nmode = "after-queue"\n')
    args = argparse.Namespace(config=str(path), db=None, listen=None, next_hop=None)
    logger = logging.getLogger("test-smtpd-reload")
    with caplog.at_level(logging.WARNING, logger="test-smtpd-reload"):
        fresh = _settings_loader(args, running, logger)()
    assert fresh.smtpd.mode == "proxy"                      # kept until a restart
    assert "smtpd.mode changed; it takes effect after a restart" in caplog.text


@pytest.mark.parametrize("spelled, libmilter", [
    ("inet:8890@127.0.0.1", "inet:8890@127.0.0.1"),
    ("inet:127.0.0.1:8890", "inet:8890@127.0.0.1"),          # Postfix's spelling
    ("INET:127.0.0.1:8890", "inet:8890@127.0.0.1"),          # libmilter ignores case
    ("inet:8890@[127.0.0.1]", "inet:8890@127.0.0.1"),        # libmilter's numeric [ADDR]
    ("inet:localhost:8890", "inet:8890@localhost"),
    ("inet:0.0.0.0:8890", "inet:8890@0.0.0.0"),              # every interface, as written
    ("inet:[::1]:8890", "inet6:8890@::1"),                   # Postfix's IPv6 spelling
    ("inet:[127.0.0.1]:8890", "inet:8890@127.0.0.1"),        # Postfix's [ADDR]:PORT
    ("inet:8890@::1", "inet6:8890@::1"),
    ("inet6:8890@[0:0::1]", "inet6:8890@::1"),
    ("inet6:8890@localhost", "inet6:8890@localhost"),
    ("unix:/run/dupfilter/milter.sock", "unix:/run/dupfilter/milter.sock"),
    ("local:/var/spool/postfix/dupfilter/milter.sock",
     "local:/var/spool/postfix/dupfilter/milter.sock"),
])
def test_milter_socket_spellings_become_libmilters(spelled: str, libmilter: str) -> None:
    assert parse_milter_socket(spelled) == libmilter
    settings = Settings()
    settings.milter.socket = spelled
    check_milter_settings(settings)                   # what the milter calls before serving
    assert settings.milter.socket == libmilter


@pytest.mark.parametrize("spelled", [
    "inet:99999@127.0.0.1", "inet:127.0.0.1:0", "inet:0@127.0.0.1", "inet:8890",
    "inet6:8890", "inet:8890@", "inet:@127.0.0.1", "inet::8890", "inet:8890:127.0.0.1",
    "inet:127.1:8890", "inet:010.0.0.1:8890", "inet:300.1.1.1:8890", "inet:::1:8890",
    "inet6:8890@127.0.0.1", "inet:[::1]8890", "inet:smtp@127.0.0.1",
    "inet:8890@127.0.0.1 ", "tcp:8890@127.0.0.1", "8890", "/run/dupfilter/milter.sock",
    "unix:milter.sock", "unix:/run/dupfilter/", "unix:/" + "x" * 120, "",
    "inet:8890@fe80::1%eth0", "inet:8890@host_name", "inet:8890@-bad.example",
])
def test_milter_socket_refused_with_one_line(spelled: str) -> None:
    with pytest.raises(Refused) as refused:
        parse_milter_socket(spelled)
    message = str(refused.value)
    assert message.startswith(repr(spelled)) and "\n" not in message
    assert "expected inet:PORT@HOST, Postfix's inet:HOST:PORT" in message
    assert ", e.g. " in message


def test_config_check_accepts_postfix_spelling(tmp_path: Path) -> None:
    import subprocess
    path = tmp_path / "site.toml"
    path.write_text('[milter]\nsocket = "inet:127.0.0.1:8890"\n')
    checked = subprocess.run(["dupfilter-db", "--config", str(path), "config", "--check"],
                             capture_output=True, text=True)
    assert checked.returncode == 0 and "configuration is valid" in checked.stdout, checked


@pytest.mark.parametrize("location", [
    "redis:/127.0.0.1:6379", "redis//127.0.0.1:6379", "redis:127.0.0.1", "rediss:/cache",
    "http://127.0.0.1:6379", "unix:relative.sock", "unix:/run/redis/redis.sock",
    "unix://run/redis/redis.sock", "ftp://127.0.0.1/x", "Redis://127.0.0.1", "redis://",
    "redis:///0", "redis://:6379", "redis://127.0.0.1:0", "redis://127.0.0.1:65536",
    "redis://127.0.0.1/x", "redis://127.0.0.1?db=one", "redis://127.1:6379",
    "redis://127.0.0.1?partitions=0", "/var/lib/x://y",
])
def test_mistyped_store_urls_are_refused(location: str) -> None:
    with pytest.raises(Refused) as refused:
        check_store_location(location)
    assert "expected an LMDB folder (an absolute path), redis://HOST[:PORT][/DB]" in \
        str(refused.value)


@pytest.mark.parametrize("location", [
    "redis://127.0.0.1:6379/0", "redis://:secret@cache.example.net:6379/2",
    "redis://cache.example.net", "rediss://user:pw@cache.example.net:6380/0?ssl_cert_reqs=none",
    "redis://[::1]:6379/0", "redis://127.0.0.1:6379?partitions=3", "unix:///run/redis.sock",
    "unix:///run/redis/redis.sock?db=2", "/var/lib/dupfilter", "/var/lib/dupfilter:old",
    "./redis:old", "store", "relative/store",
])
def test_store_locations_that_are_fine(location: str) -> None:
    assert check_store_location(location) == location


def test_a_mistyped_redis_url_never_becomes_a_local_store(tmp_path: Path) -> None:
    """Issue 14 item 3: on db08d02 ``--db redis:/127.0.0.1:6379`` created
    ./redis:/127.0.0.1:6379/data.mdb and the hosts silently stopped sharing one store."""
    import subprocess

    from helpers import make_message
    from test_docs import sandbox_env
    env = sandbox_env(tmp_path)
    raw = make_message("hello there " * 20, message_id="<typo@example.org>")
    work = tmp_path / "cwd"
    work.mkdir()
    for url in ("redis:/127.0.0.1:6379", "redis//127.0.0.1:6379"):
        tagged = subprocess.run(["dupfilter", "--db", url, "--tag"], input=raw, cwd=work,
                                capture_output=True, env=env, timeout=60)
        assert tagged.returncode == 0 and tagged.stdout == raw        # passed through
        stderr = tagged.stderr.decode()
        assert f"--db {url!r} looks like a URL" in stderr, stderr     # names the flag
        assert stderr.count("\n") == 1 and "message passed through unchecked" in stderr
        admin = subprocess.run(["dupfilter-db", "--db", url, "stats"], cwd=work,
                               capture_output=True, text=True, env=env, timeout=60)
        assert admin.returncode == 2 and "looks like a URL" in admin.stderr, admin
        pruned = subprocess.run(["dupfilter-db", "--db", url, "prune"], cwd=work,
                                capture_output=True, text=True, env=env, timeout=60)
        assert pruned.returncode == 2 and "looks like a URL" in pruned.stderr, pruned
    assert list(work.iterdir()) == []                                 # nothing created
    # A real folder with a colon in its name is still an LMDB store.
    folder = tmp_path / "dupfilter:old"
    for _ in range(2):
        tagged = subprocess.run(["dupfilter", "--db", str(folder), "--tag"], input=raw,
                                capture_output=True, env=env, timeout=60)
        assert tagged.returncode == 0 and not tagged.stderr, tagged.stderr
    assert b"X-Dupfilter: duplicate;" in tagged.stdout
    assert (folder / "data.mdb").is_file()


def test_config_file_store_path_typo_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "site.toml"
    path.write_text('[store]\n# shared by every host\npath = "redis:/127.0.0.1:6379"\n')
    with pytest.raises(ConfigError) as error:
        load_settings(path)
    assert str(error.value).startswith(f"{path}:3: store.path = 'redis:/127.0.0.1:6379' ")
    assert str(error.value).endswith("e.g. redis://127.0.0.1:6379")


def test_socket_group_that_does_not_exist(tmp_path: Path) -> None:
    path = tmp_path / "site.toml"
    path.write_text('[milter]\nsocket = "unix:/run/dupfilter/milter.sock"\n'
                    'socket_group = "no-such-group-here"\n')
    settings = load_settings(path)
    with pytest.raises(ConfigError) as error:
        check_socket_group(settings)
    assert str(error.value).startswith(f"{path}:3: milter.socket_group = "
                                       "'no-such-group-here' is no group on this machine")
    settings.milter.socket_group = "root"
    check_socket_group(settings)
    settings.milter.socket_group = "no-such-group-here"
    settings.milter.socket = "inet:8890@127.0.0.1"              # no socket file to chgrp
    check_socket_group(settings)


def test_port_zero_only_from_code(tmp_path: Path) -> None:
    """Port 0 (the system picks one) is refused in a file; code (the test rigs) may ask."""
    from mailfilter.config import check_smtpd_settings
    settings = Settings()
    settings.smtpd.listen = "127.0.0.1:0"
    check_smtpd_settings(settings)
    path = tmp_path / "site.toml"
    path.write_text('[smtpd]\nlisten = "127.0.0.1:0"\n')
    with pytest.raises(ConfigError, match=r":2: smtpd.listen = '127.0.0.1:0' has port 0"):
        check_smtpd_settings(load_settings(path))


def test_the_error_shown_in_operations_md_is_the_real_one(tmp_path: Path) -> None:
    import re
    import subprocess
    operations = (Path(__file__).resolve().parents[1] / "docs" / "operations.md").read_text()
    shown = re.search(r"^(dupfilter-db: /etc/dupfilter/dupfilter\.toml:3: milter\.socket.*)$",
                      operations, re.M)[1]
    path = tmp_path / "dupfilter.toml"
    path.write_text('# site\n[milter]\nsocket = "inet:8890"\n')
    checked = subprocess.run(["dupfilter-db", "--config", str(path), "config", "--check"],
                             capture_output=True, text=True)
    assert checked.returncode == 2
    assert checked.stderr == shown.replace("/etc/dupfilter/dupfilter.toml", str(path)) + "\n"


def test_reload_sees_no_change_in_a_socket_spelled_the_postfix_way(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from mailfilter.service import reload_settings
    path = tmp_path / "site.toml"
    path.write_text('[milter]\nsocket = "inet:127.0.0.1:8890"\n')
    running = load_settings(path)
    check_milter_settings(running)                          # as the milter does at start
    assert running.milter.socket == "inet:8890@127.0.0.1"
    logger = logging.getLogger("test-config-reload")
    with caplog.at_level(logging.WARNING, logger="test-config-reload"):
        assert reload_settings(running, lambda: load_settings(path), "milter", ("socket",),
                               logger)
    assert "changed" not in caplog.text


# ----------------------------------------------------------- a broken file, everywhere
BROKEN = {
    "syntax": ("[store]\nretention = \"30d\"\n[detector]\nmin_words = = 3\n",
               "4: not valid TOML: Invalid value (column 13)"),
    "section": ("# site\n[store]\nretention = \"30d\"\n[detectr]\nscope = \"global\"\n",
                "4: unknown section [detectr]; did you mean [detector]?"),
    "key": ("[store]\nretention = \"30d\"\n[detector]\nscope = \"global\"\n"
            "resemblence_threshold = 0.3\n",
            "5: unknown key detector.resemblence_threshold; did you mean "
            "detector.resemblance_threshold?"),
    "value": ("[store]\nretention = \"30d\"\n\n[detector]\nresemblance_threshold = 1.5\n",
              "5: detector.resemblance_threshold must be in (0, 1]"),
}


@pytest.mark.parametrize("given", ["--config", "DUPFILTER_CONFIG"])
@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_settings_file_is_named_everywhere_and_loses_no_mail(
        tmp_path: Path, case: str, given: str) -> None:
    """Issue 20 item 5: a broken settings file (a syntax error, a misspelt section or key, a
    bad value).  `config --check` names the file and line (before: ':?:' for a misspelt
    section, and no name it meant); `status` runs and says WARNING, exit 1, with no daemon
    too (before: 3, UNKNOWN, on a pipe-only host); the pipe filter does what
    docs/procmail.md says: --tag passes the message through whole, without a header, exit
    0, --check exits 1, each naming the file and line on stderr; nothing is recorded."""
    from helpers import make_message, paragraph_text
    from support.cli import DUPFILTER, DUPFILTER_DB, run
    content, said = BROKEN[case]
    path = tmp_path / "dupfilter.toml"
    path.write_text(content)
    env = {"XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "x")}
    flags: tuple[str, ...] = ("--config", str(path))
    if given == "DUPFILTER_CONFIG":
        env["DUPFILTER_CONFIG"], flags = str(path), ()
    where = f"{path}:{said}"

    checked = run(DUPFILTER_DB, *flags, "config", "--check", env=env)
    assert checked.returncode == 2 and checked.stderr.decode() == f"dupfilter-db: {where}\n"

    status = run(DUPFILTER_DB, *flags, "status", "--status-dir", str(tmp_path / "run"),
                 env=env)
    text = status.stdout.decode()
    assert status.returncode == 1, text + status.stderr.decode()
    assert text.startswith("WARNING: the settings do not load (") and text.splitlines()[
        0].endswith(f": {where}"), text

    raw = make_message(paragraph_text(31), message_id="<broken@example.org>")
    forged = b"X-Dupfilter: duplicate; forged\n" + raw
    tagged = run(DUPFILTER, *flags, "--tag", stdin=forged, env=env)
    assert tagged.returncode == 0 and tagged.stdout == raw
    assert tagged.stderr.decode() == f"dupfilter: {where}; message passed through unchecked\n"
    answer = run(DUPFILTER, *flags, "--check", stdin=raw, env=env)
    assert answer.returncode == 1 and answer.stdout == b""
    assert answer.stderr.decode() == \
        f"dupfilter: {where}; message not checked (exit 1: not a duplicate)\n"
    assert not (tmp_path / "state").exists()                 # no store made or written


def test_the_broken_file_lines_in_the_docs_are_the_real_ones(tmp_path: Path) -> None:
    """The misspelt-section lines docs/operations.md and docs/procmail.md print are what
    `dupfilter-db config --check` and `dupfilter --tag` say for that file."""
    import re
    import subprocess
    docs = Path(__file__).resolve().parents[1] / "docs"
    system = "/etc/dupfilter/dupfilter.toml"
    path = tmp_path / "dupfilter.toml"
    path.write_text(BROKEN["section"][0])
    for page, pattern, argv in (
            ("operations.md", r"^(dupfilter-db: /etc/dupfilter/dupfilter\.toml:\d+: unknown "
             r"section.*)$", ["dupfilter-db", "--config", str(path), "config", "--check"]),
            ("procmail.md", r"^(dupfilter: /etc/dupfilter/dupfilter\.toml:\d+: unknown "
             r"section.*)$", ["dupfilter", "--config", str(path), "--tag"])):
        shown = re.search(pattern, (docs / page).read_text(), re.M)[1]
        done = subprocess.run(argv, input=b"Subject: x\n\nhello\n", capture_output=True,
                              env={**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")})
        assert done.stderr.decode() == shown.replace(system, str(path)) + "\n", page
