"""Property tests of the settings parser (issue 14): whatever a postmaster types into the
address and store settings, once the file has loaded and the daemons' checks have passed,

- no listener is on an address other than loopback unless the value names that address
  (``0.0.0.0``, ``::``, ``10.1.2.3``, a host name) itself: an empty host, a missing host
  (libmilter's ``inet:PORT``: every interface) or a misread spelling never gets through;
- every port is 1-65535;
- a store location is an absolute folder or a Redis URL with a host (or a unix socket path):
  nothing that looks like a URL becomes a folder;
- and a refusal is one :class:`ConfigError` line that names the key.

The values are built from the pieces people mistype (schemes, separators, hosts, ports) and
from arbitrary text, and written into a real TOML file that ``load_settings`` reads.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mailfilter.config import (
    ConfigError,
    check_milter_settings,
    check_smtpd_settings,
    is_loopback,
    load_settings,
    parse_hostport,
)

HOSTS = ["127.0.0.1", "::1", "localhost", "0.0.0.0", "::", "10.1.2.3", "192.168.0.1",
         "fd00::2", "0:0::1", "mx.example.org", "LocalHost", "", "127.1", "*", "[::1]", "::1:",
         "0", "256.1.1.1", "010.0.0.1", "fe80::1%eth0", "host_name", "-x.example", "1.2.3"]
PORTS = ["8890", "1", "65535", "0", "65536", "99999", "", "smtp", "08890", " 25", "-1",
         "1e3", "٣"]
PATHS = ["/run/dupfilter/milter.sock", "relative.sock", "/", "/var/lib/dupfilter:old", "",
         "~/x", "./x"]

text = st.text(max_size=24)
hosts = st.one_of(st.sampled_from(HOSTS), text)
ports = st.one_of(st.sampled_from(PORTS), st.integers(-10, 70000).map(str), text)


@st.composite
def milter_sockets(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["inet", "inet6", "INET", "unix", "local", "tcp", ""]))
    host, port = draw(hosts), draw(ports)
    shape = draw(st.sampled_from(["{k}:{p}@{h}", "{k}:{h}:{p}", "{k}:[{h}]:{p}", "{k}:{p}",
                                  "{k}:{h}", "{k}:{p}@[{h}]", "{k}:{path}", "{k}{path}",
                                  "{k}:{p}:{h}"]))
    composed = shape.format(k=kind, h=host, p=port, path=draw(st.sampled_from(PATHS)))
    return draw(st.one_of(st.just(composed), text))


@st.composite
def host_ports(draw: st.DrawFn) -> str:
    host, port = draw(hosts), draw(ports)
    shape = draw(st.sampled_from(["{h}:{p}", "[{h}]:{p}", "{h}", ":{p}", "{h}:{p}:{p}"]))
    return draw(st.one_of(st.just(shape.format(h=host, p=port)), text))


@st.composite
def store_paths(draw: st.DrawFn) -> str:
    scheme = draw(st.sampled_from(["redis", "rediss", "unix", "REDIS", "http", "ftp", ""]))
    separator = draw(st.sampled_from(["://", ":/", ":", "//", ":///", "/"]))
    host, port = draw(hosts), draw(ports)
    user = draw(st.sampled_from(["", ":secret@", "u:pw@", "@"]))
    tail = draw(st.sampled_from(["", "/0", "/x", "?db=2", "?db=x", "?partitions=3",
                                 "/run/redis.sock", ":old"]))
    netloc = f"[{host}]" if ":" in host else host
    composed = f"{scheme}{separator}{user}{netloc}:{port}{tail}"
    return draw(st.one_of(st.just(composed), st.sampled_from(PATHS), text,
                          st.builds(lambda p: "/" + p, text)))


KEYS = {
    ("milter", "socket"): milter_sockets(),
    ("smtpd", "listen"): host_ports(),
    ("smtpd", "next_hop"): host_ports(),
    ("metrics", "listen"): host_ports(),
    ("store", "path"): store_paths(),
}


def toml_string(value: str) -> str:
    """A TOML basic string holding exactly ``value``."""
    out = []
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def write(path: Path, values: dict[tuple[str, str], str]) -> None:
    sections: dict[str, list[str]] = {}
    for (section, key), value in values.items():
        sections.setdefault(section, []).append(f"{key} = {toml_string(value)}")
    path.write_text("".join(f"[{name}]\n" + "\n".join(lines) + "\n\n"
                            for name, lines in sections.items()), encoding="utf-8")


def named_explicitly(host: str, typed: str) -> bool:
    """``host`` (where a daemon will listen) is written in what the user typed."""
    if host.lower() in typed.lower():
        return True
    try:
        wanted = ipaddress.ip_address(host)
    except ValueError:
        return False
    for candidate in re.findall(r"[0-9A-Fa-f:.]+", typed):
        try:
            if ipaddress.ip_address(candidate) == wanted:
                return True
        except ValueError:
            continue
    return False


def libmilter_address(spec: str) -> tuple[str, int] | None:
    """Where libmilter's mi_milteropen() listens for ``spec`` (None: a unix socket): the
    port is atoi() of what follows the type, modulo 2**16, the host what follows ``@``
    (brackets: a numeric address), and without ``@`` every interface."""
    kind, _, rest = spec.partition(":")
    if kind.lower() not in ("inet", "inet6"):
        return None
    port_text, at, host = rest.partition("@")
    digits = re.match(r"\d*", port_text)[0]
    port = int(digits or 0) % 65536
    if not at:
        host = "::" if kind.lower() == "inet6" else "0.0.0.0"
    return host.strip("[]"), port


def listeners(loaded) -> list[tuple[str, str, int]]:  # noqa: ANN001
    """(key, host, port) of each address a daemon would listen on or connect to, read the
    way the code that uses it reads it (libmilter, dupfilter-smtpd, metrics.start)."""
    out = []
    milter = libmilter_address(loaded.milter.socket)
    if milter is not None:
        out.append(("milter.socket", *milter))
    for key, value in (("smtpd.listen", loaded.smtpd.listen),
                       ("smtpd.next_hop", loaded.smtpd.next_hop)):
        out.append((key, *parse_hostport(value, key)))          # as dupfilter-smtpd does
    host, _, port = loaded.metrics.listen.rpartition(":")       # as metrics.start() does
    out.append(("metrics.listen", host.strip("[]") or "127.0.0.1", int(port)))
    return out


def load_and_check(path: Path):  # noqa: ANN201
    loaded = load_settings(path)
    check_milter_settings(loaded)
    check_smtpd_settings(loaded)
    return loaded


def assert_safe(loaded, typed: dict[tuple[str, str], str]) -> None:  # noqa: ANN001
    for key, host, port in listeners(loaded):
        section, name = key.split(".")
        said = typed.get((section, name))
        assert 1 <= port <= 65535, (key, port)
        assert host, (key, "empty host")
        if said is not None:
            # as typed (a leading zero, "08890", is the same port)
            assert port in [int(d) for d in re.findall(r"\d+", said)], (key, port, said)
        if not is_loopback(host):
            assert named_explicitly(host, said or ""), (key, host, typed)
    path = loaded.store.path
    if path.startswith(("redis://", "rediss://")):
        from urllib.parse import urlsplit
        parts = urlsplit(path)
        assert parts.hostname and (parts.port is None or 1 <= parts.port <= 65535), path
    elif path.startswith("unix://"):
        assert path.startswith("unix:///"), path
    else:
        assert path == "" or path.startswith("/"), path
        assert "://" not in path, path
        assert not re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", path), path


@settings(max_examples=600, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_one_setting_at_a_time(tmp_path: Path, data: st.DataObject) -> None:
    key = data.draw(st.sampled_from(sorted(KEYS)))
    value = data.draw(KEYS[key])
    path = tmp_path / "dupfilter.toml"
    write(path, {key: value})
    try:
        loaded = load_and_check(path)
    except ConfigError as error:
        message = str(error)
        assert f"{key[0]}.{key[1]}" in message, (value, message)
        assert "\n" not in message and message.startswith(f"{path}:"), message
        assert "secret" not in message, message                  # passwords are masked
        return
    assert_safe(loaded, {key: value})


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_all_of_them_together(tmp_path: Path, data: st.DataObject) -> None:
    values = {key: data.draw(strategy) for key, strategy in KEYS.items()}
    path = tmp_path / "dupfilter.toml"
    write(path, values)
    try:
        loaded = load_and_check(path)
    except ConfigError as error:
        message = str(error)
        assert any(f"{section}.{key}" in message for section, key in values), message
        assert "\n" not in message, message
        return
    assert_safe(loaded, values)


def test_the_generators_reach_both_outcomes(tmp_path: Path) -> None:
    """Not vacuous: typical spellings are accepted and land where they say."""
    typed = {("milter", "socket"): "inet:[::1]:8890", ("smtpd", "listen"): "0.0.0.0:10025",
             ("smtpd", "next_hop"): "localhost:10026", ("metrics", "listen"): "[::]:9464",
             ("store", "path"): "redis://:secret@cache.example.net:6379/0"}
    path = tmp_path / "dupfilter.toml"
    write(path, typed)
    loaded = load_and_check(path)
    assert loaded.milter.socket == "inet6:8890@::1"
    assert listeners(loaded) == [("milter.socket", "::1", 8890),
                                 ("smtpd.listen", "0.0.0.0", 10025),
                                 ("smtpd.next_hop", "localhost", 10026),
                                 ("metrics.listen", "::", 9464)]
    assert_safe(loaded, typed)
