"""The documentation's commands for a real installation, run as written, as root.

Run only by ``tests/test_docs.py::test_system_blocks_in_a_private_namespace``, which starts
this file under ``unshare --mount --net --pid --fork --kill-child --mount-proc``: pytest is
PID 1 of its own PID namespace (every process started here dies with it), has only its own
loopback network (Postfix may take port 25, Redis 6379, the content filter 10025), and lays
overlays over /etc, /usr, /var, /root, /home, /opt, /srv and /run before the first test, so
that `pip install`, `useradd`, `install -d /run/dupfilter`, files under /etc and the mail
spools change only the overlays (kept under $DUPFILTER_DOC_SANDBOX, deleted afterwards).

The tests depend on each other in file order (install first, then the daemons and the
delivery agents), as a postmaster would follow the docs; pytest runs with ``-x``.

What is not exactly as on a fresh Debian machine, and why:
- pip installs offline (``PIP_NO_INDEX``, no build isolation): there is no network in here,
  and every dependency is already installed; ``pip install 'dupfilter[milter]'`` is served
  a wheel built from this checkout (``PIP_FIND_LINKS``), as PyPI would serve it.
- This Python is not Debian's (which refuses ``pip install`` outside a venv, PEP 668), so
  its console scripts are linked into /usr/local/bin, where the units, cron, Dovecot and
  maildrop expect them (pip as root would put them there), and /root is made traversable
  (a system-wide Python is readable by the ``dupfilter`` and mail users).
- systemd is not PID 1: units are enabled (``systemctl enable``) and verified, not started;
  the daemons are started with the documented command lines instead.
- A dupfilter this host already has (installed as docs/install.md says: /usr/local/bin/
  dupfilter*, /etc/dupfilter, /var/lib/dupfilter, /run/dupfilter, its units and user) is
  removed from the overlays before the first test (:func:`forget_installation`), so the
  docs run on a host without it, as written; the host's own files are not touched
  (tests/conftest.py compares them before and after the session).
"""

from __future__ import annotations

import functools
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import smtplib
import subprocess
import sys
import sysconfig
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from doc_blocks import REPO, block, blocks  # noqa: E402
from helpers import make_message, paragraph_text  # noqa: E402
from support.ports import wait_for_port  # noqa: E402
from support.postfix import PostfixHarness  # noqa: E402
from support.smtp_sink import Delivery  # noqa: E402

SANDBOX = os.environ.get("DUPFILTER_DOC_SANDBOX", "")
OUTSIDE = os.environ.get("DUPFILTER_DOC_OUTSIDE", "")     # the caller's mount and net ns
if not SANDBOX or os.getpid() != 1 or OUTSIDE == " ".join(
        os.readlink(f"/proc/self/ns/{kind}") for kind in ("mnt", "net")):
    pytest.skip("runs only as PID 1 of the namespaces test_docs.py creates",
                allow_module_level=True)

WORK = Path(SANDBOX)
CHECKOUT = WORK / "checkout"
OVERLAID = ("/etc", "/usr", "/var", "/root", "/home", "/opt", "/srv", "/run")
SCRIPTS = Path(sysconfig.get_path("scripts"))          # where pip puts console scripts
CONSOLE_SCRIPTS = ("dupfilter", "dupfilter-db", "dupfilter-milter", "dupfilter-smtpd")
USER_PATH = "/usr/local/bin:/usr/bin:/bin"
ROOT_PATH = f"{SCRIPTS}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CONFIG = Path("/etc/dupfilter/dupfilter.toml")
# root's temporary files (README's `mktemp -d` store): in the work folder, which the
# caller removes, not in the host's /tmp, which no overlay covers.
TEMPORARY = WORK / "tmp"


@pytest.fixture(scope="module", autouse=True)
def private_system() -> Iterator[None]:
    """Overlays over the system folders, loopback up, a copy of the checkout."""
    for target in OVERLAID:
        assert Path(target).is_dir(), f"{target} missing: useradd/pip could write elsewhere"
        layer = WORK / "overlay" / target.strip("/")
        (layer / "upper").mkdir(parents=True)
        (layer / "work").mkdir()
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={target},upperdir={layer}/upper,workdir={layer}/work",
                        target], check=True)
    forget_installation()
    TEMPORARY.mkdir()
    Path("/root").chmod(0o711)
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    files = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=REPO,
                           capture_output=True, check=True).stdout.split(b"\0")
    CHECKOUT.mkdir()
    for name in filter(None, files):
        source = REPO / os.fsdecode(name)
        if source.is_file():
            (CHECKOUT / source.relative_to(REPO)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, CHECKOUT / source.relative_to(REPO))
    yield


# What docs/install.md and docs/operations.md put on a host (the source tree and /opt's
# environment too): removed before the docs run, as from a host where dupfilter never was.
INSTALLED = ("/usr/local/bin/dupfilter*", "/etc/dupfilter", "/var/lib/dupfilter",
             "/run/dupfilter", "/etc/systemd/system/dupfilter-*",
             "/etc/systemd/system/*.wants/dupfilter-*", "/opt/dupfilter",
             "/usr/local/src/dupfilter")


def overlaid(path: str) -> bool:
    """``path`` is on one of this namespace's overlays (what is removed there stays on the
    host: an overlay's lower folder is never written)."""
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    overlays = {fields[1] for fields in map(str.split, mounts) if fields[0] == "overlay"}
    return any(path == target or path.startswith(f"{target}/") for target in overlays)


def forget_installation() -> None:
    """Remove a dupfilter installation (:data:`INSTALLED`, the ``dupfilter`` user) from the
    overlays; refuses to touch anything that is not on one."""
    import glob
    for pattern in INSTALLED:
        for found in glob.glob(pattern):
            assert overlaid(found), f"{found} is not on an overlay: not removed"
            if os.path.isdir(found) and not os.path.islink(found):
                shutil.rmtree(found)
            else:
                os.unlink(found)
    assert overlaid("/etc/passwd") and overlaid("/etc/shadow")
    try:
        pwd.getpwnam("dupfilter")
    except KeyError:
        return
    subprocess.run(["userdel", "dupfilter"], check=True)


def root_env(**extra: str) -> dict[str, str]:
    """root's login environment, offline pip settings (see the module doc)."""
    return {"PATH": ROOT_PATH, "HOME": "/root", "USER": "root", "LOGNAME": "root",
            "SHELL": "/bin/bash", "LANG": "C.UTF-8", "PIP_NO_INDEX": "1",
            "PIP_NO_BUILD_ISOLATION": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_ROOT_USER_ACTION": "ignore", "TMPDIR": str(TEMPORARY), **extra}


def sh(script: str, *, cwd: Path = CHECKOUT, env: dict[str, str] | None = None,
       check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """A documented block as a bash script that stops at the first failing command."""
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd,
                          env=env or root_env(), capture_output=True, text=True,
                          timeout=timeout)
    if check:
        assert done.returncode == 0, f"{script}\nexit {done.returncode}\n{done.stdout}" \
                                     f"\n{done.stderr}"
    return done


def ensure_user(name: str) -> Path:
    """A mail user with a home under /home (overlaid); returns the home."""
    try:
        return Path(pwd.getpwnam(name).pw_dir)
    except KeyError:
        sh(f"useradd -m -d /home/{name} -s /bin/sh {name}", cwd=Path("/"))
        return Path(f"/home/{name}")


def as_user(user: str, argv: Sequence[str], *, data: bytes | None = None,
            cwd: Path | None = None, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[bytes]:
    """``argv`` as ``user`` with a clean environment (the user's home, PATH below)."""
    home = pwd.getpwnam(user).pw_dir
    settings = {"HOME": home, "USER": user, "LOGNAME": user, "PATH": USER_PATH,
                "LANG": "C.UTF-8", **(env or {})}
    return subprocess.run(["runuser", "-u", user, "--", "env", "-i",
                           *(f"{k}={v}" for k, v in settings.items()), *argv],
                          input=data, capture_output=True, cwd=cwd or home, timeout=120)


def give(path: Path, user: str, mode: int = 0o644) -> None:
    entry = pwd.getpwnam(user)
    os.chown(path, entry.pw_uid, entry.pw_gid)
    path.chmod(mode)


def x_dupfilter(data: bytes) -> str:
    (value,) = re.findall(rb"^X-Dupfilter: (.*?)\r?$", data, re.MULTILINE)
    return value.decode()


def log_keys(line: str) -> list[str]:
    """The keys of a ``key=value`` log line, in order (values may be quoted)."""
    return re.findall(r'(?:^|\s)(\w+)=(?:"[^"]*"|\S*)', line)


# root's PATH without /usr/local/bin and the Python's scripts: where a virtual environment
# nobody activated leaves dupfilter's commands (issue 14 item 6).
NO_DUPFILTER_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


class Daemon:
    """A documented daemon command line, run by bash as root; stderr kept in a file."""

    def __init__(self, command: str, name: str) -> None:
        self.command = command.strip()
        self.log = WORK / f"{name}.log"
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(["bash", "-c", f"exec {self.command}"],
                                         stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, env=root_env(),
                                         cwd="/")

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_until(self, ready: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            assert self.proc.poll() is None, f"{self.command} exited:\n{self.text()}"
            assert time.monotonic() < deadline, f"{what} after {timeout}s:\n{self.text()}"
            time.sleep(0.1)

    def lines(self, count: int, timeout: float = 15.0) -> list[str]:
        """The first ``count`` per-message lines (those with ``queue=``)."""
        def found() -> list[str]:
            return [line for line in self.text().splitlines() if " queue=" in line]
        self.wait_until(lambda: len(found()) >= count, f"{count} log lines", timeout)
        return found()[:count]

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(40)


def deliver_twice(send: Callable[[bytes], None], fetch: Callable[[int], list[Delivery]],
                  recorded: Callable[[], None] = lambda: None) -> tuple[str, str]:
    """Send a message and a second copy (new Message-ID); X-Dupfilter of both copies.

    ``recorded`` waits until the first is in the store: the milter commits records a few
    milliseconds after it answered Postfix (docs/postfix.md, "Recording")."""
    text = paragraph_text(int(time.monotonic() * 1000) % 100000, count=150)
    values = []
    for number in (1, 2):
        message_id = f"<copy{number}.{time.time()}@example.org>"
        send(make_message(text, message_id=message_id, crlf=True))
        (copy,) = [c for c in fetch(number) if c.header("Message-ID") == [message_id]]
        values.append(copy.header("X-Dupfilter")[0])
        recorded()
    return values[0], values[1]


def wait_for_records(store: str, user: str, count: int, timeout: float = 20.0) -> None:
    """Poll ``dupfilter-db stats`` (as the store's owner) until ``count`` records."""
    deadline = time.monotonic() + timeout
    while True:
        done = as_user(user, ["dupfilter-db", "--db", store, "stats", "--json"])
        if done.returncode == 0 and json.loads(done.stdout)["records"] >= count:
            return
        assert time.monotonic() < deadline, f"{store}: not {count} records: {done.stderr}"
        time.sleep(0.2)


def smtp_send(port: int, recipients: Sequence[str]) -> Callable[[bytes], None]:
    def send(raw: bytes) -> None:
        with smtplib.SMTP("127.0.0.1", port, local_hostname="client.example.org",
                          timeout=60) as client:
            client.sendmail("ann@example.org", list(recipients), raw)
    return send


def entry(master_cf: str, service: str) -> list[str]:
    """One master.cf entry (its line and the ``-o`` lines under it)."""
    lines = master_cf.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:1] == [service])
    end = start + 1
    while end < len(lines) and lines[end].startswith((" ", "\t")):
        end += 1
    return lines[start:end]


# ------------------------------------------------------------------------------ install

def test_readme_install_and_scan() -> None:
    for stale in ("/root/.local/state/dupfilter", "/root/.config/dupfilter"):
        shutil.rmtree(stale, ignore_errors=True)
    text = block("system", "readme-install").text
    done = sh(text)
    assert "Successfully installed dupfilter" in done.stdout
    assert "7 messages: 3 unique, 2 duplicate, 2 near-duplicate" in done.stdout
    # A throw-away store: root's own store is not created, and the sample scans the same
    # again (issue 14: a second run said all seven were duplicates).
    assert not Path("/root/.local/state/dupfilter").exists()
    again = sh(text.split("&&", 1)[1])
    assert "7 messages: 3 unique, 2 duplicate, 2 near-duplicate" in again.stdout
    where = sh("python3 -c 'import mailfilter; print(mailfilter.__file__)'", cwd=Path("/"))
    assert "site-packages" in where.stdout             # installed, not the editable checkout
    if SCRIPTS != Path("/usr/local/bin"):
        for name in CONSOLE_SCRIPTS:
            Path("/usr/local/bin", name).symlink_to(SCRIPTS / name)


def test_operations_install() -> None:
    sh(block("system", "operations-install").text)
    user = pwd.getpwnam("dupfilter")
    assert (user.pw_dir, user.pw_shell) == ("/var/lib/dupfilter", "/usr/sbin/nologin")
    assert user.pw_uid < 1000                                          # --system
    assert CONFIG.read_text() == (CHECKOUT / "config" / "dupfilter.toml").read_text()
    units = sorted(p.name for p in Path("/etc/systemd/system").glob("dupfilter-*"))
    assert units == sorted(p.name for p in (CHECKOUT / "systemd").iterdir())
    # The prose right after the block.
    checked = sh(f"dupfilter-db --config {CONFIG} config --check")
    assert "configuration is valid" in checked.stdout
    sh(f"dupfilter-db --config {CONFIG} config --show")


def test_units_enable_and_verify() -> None:
    (example,) = blocks("systemctl")
    enabled = []
    for line in example.lines():
        argv = shlex.split(line)
        assert argv[0] == "systemctl", line
        if argv[1] == "daemon-reload":
            continue            # needs a running systemd; enable reads the files itself
        assert argv[1] == "enable", line
        units = [arg for arg in argv[2:] if not arg.startswith("-")]
        # --now would start them: no systemd here (the daemons are started by hand below).
        sh(shlex.join(["systemctl", "enable", *units]))
        enabled += units
    wants = {p.name for p in Path("/etc/systemd/system").glob("*.wants/*")}
    assert set(enabled) <= wants and enabled
    # verify resolves ExecStart= to the console scripts in /usr/local/bin.
    done = sh("systemd-analyze verify /etc/systemd/system/dupfilter-*")
    assert not done.stderr.strip(), done.stderr


def test_milter_install() -> None:
    wheels = WORK / "wheels"
    sh(f"python3 -m pip wheel --no-deps -w {wheels} .")
    sh("python3 -m pip uninstall -y dupfilter-mail")
    done = sh(block("system", "milter-install").text, env=root_env(PIP_FIND_LINKS=str(wheels)))
    assert "Successfully installed dupfilter" in done.stdout
    sh("dupfilter-milter --version && python3 -c 'import Milter'", cwd=Path("/"))


# ------------------------------------------------------------------------------ Postfix

def test_milter_with_the_documented_postfix_lines() -> None:
    settings = block("toml", "milter")
    CONFIG.write_text(settings.text)
    sh(block("system", "milter-dirs").text)
    socket_path = re.search(r'^socket = "unix:([^"]+)"', settings.text, re.M)[1]
    (main_cf,) = blocks("postfix-main")
    postfix = PostfixHarness(WORK / "postfix-milter", main_cf=main_cf.lines())
    commands = sorted({b.text.strip() for b in blocks("milter-daemon")})
    for number, command in enumerate(commands):
        milter = Daemon(command, f"milter{number}")
        milter.wait_until(lambda: Path(socket_path).is_socket(), f"no {socket_path}")
        if number == 0:
            postfix.start()
        try:
            db = re.search(r"--db (\S+)", command)
            store = db[1] if db else "/var/lib/dupfilter/.local/state/dupfilter"
            first, second = deliver_twice(
                lambda raw: postfix.send(raw, "ann@example.org", ["alice@maildir.test"]),
                lambda n: postfix.wait_for_delivery(n, recipient="alice@maildir.test"),
                functools.partial(wait_for_records, store, "dupfilter", 1))
            assert first == "unique", postfix.log_tail()
            assert second.startswith("duplicate; score=1.00; reason=digest; match=<copy1")
            line = milter.lines(2)[1]
            for example in blocks("milter-log"):
                assert log_keys(example.text) == log_keys(line), (example.where, line)
                assert example.text.split()[0] in line                  # the level
        finally:
            assert milter.stop() == 0, milter.text()
        postfix.clear()
    # The milter's command, as printed, where dupfilter-milter is on no PATH (a virtual
    # environment not activated): it fails at once, and Postfix with the documented main.cf
    # (milter_default_action = tempfail) defers the client's mail and logs why.
    missing = sh(commands[0], cwd=Path("/"), env=root_env(PATH=NO_DUPFILTER_PATH),
                 check=False, timeout=30)
    assert missing.returncode == 127, missing
    assert "dupfilter-milter: command not found" in missing.stderr, missing
    raw = make_message(paragraph_text(4343, count=150), message_id="<nomilter@example.org>",
                       crlf=True)
    with pytest.raises(smtplib.SMTPSenderRefused) as deferred:
        postfix.send(raw, "ann@example.org", ["alice@maildir.test"])
    assert deferred.value.smtp_code == 451, deferred.value
    assert deferred.value.smtp_error.startswith(b"4.7.1"), deferred.value
    postfix.wait_log(re.escape(f"connect to Milter service unix:{socket_path}: "
                               "No such file or directory"))
    assert postfix.deliveries() == [] and postfix.queue_size() == 0
    shown = sh(f"postconf -c {postfix.etc} -n", cwd=Path("/")).stdout
    postfix.stop()
    for line in main_cf.lines():
        name, value = (part.strip() for part in line.split("=", 1))
        assert f"{name} = {value}\n" in shown, line
    # Where operations.md's backup, mdb_stat and verify look for the store.
    assert Path("/var/lib/dupfilter/data.mdb").is_file(), sh("find /var/lib/dupfilter").stdout
    operations = (CHECKOUT / "docs" / "operations.md").read_text()
    assert "`mdb_stat -a /var/lib/dupfilter`" in operations
    assert "docs" in sh("mdb_stat -a /var/lib/dupfilter", cwd=Path("/")).stdout
    assert "`dupfilter-db verify`" in operations
    verified = as_user("dupfilter", ["dupfilter-db", "--db", "/var/lib/dupfilter", "verify"])
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_content_filter_after_the_queue() -> None:
    master_cf = block("postfix-master", "after-queue")
    (command,) = blocks("smtpd-daemon")
    listen = re.search(r"--listen \S+:(\d+)", command.text)[1]
    filter_daemon = Daemon(command.text, "smtpd-after-queue")
    try:
        wait_for_port("127.0.0.1", int(listen), 30)
        postfix = PostfixHarness(WORK / "postfix-after-queue",
                                 master_cf=master_cf.text.splitlines())
        postfix.start()
        try:
            wait_for_port("127.0.0.1", 25)          # the documented public smtpd
            first, second = deliver_twice(smtp_send(25, ["bob@sink.test"]),
                                          lambda n: postfix.wait_for_delivery(n))
        finally:
            postfix.stop()
        assert first == "unique"
        assert second.startswith("duplicate; score=1.00; reason=digest; match=<copy1")
        line = filter_daemon.lines(2)[1]
        for example in blocks("smtpd-log"):
            assert log_keys(example.text) == log_keys(line), (example.where, line)
    finally:
        assert filter_daemon.stop() == 0, filter_daemon.text()


def test_content_filter_not_found_defers_mail_until_it_runs() -> None:
    """The filter's command, as printed, where dupfilter-smtpd is on no PATH: it fails at
    once; Postfix with the documented master.cf accepts the message, keeps it queued
    (deferred, "Connection refused" in its log) and delivers it, checked, once the filter
    runs as printed (issue 14 item 6)."""
    master_cf = block("postfix-master", "after-queue")
    (command,) = blocks("smtpd-daemon")
    missing = sh(command.text, cwd=Path("/"), env=root_env(PATH=NO_DUPFILTER_PATH),
                 check=False, timeout=30)
    assert missing.returncode == 127, missing
    assert "dupfilter-smtpd: command not found" in missing.stderr, missing
    postfix = PostfixHarness(WORK / "postfix-filter-missing",
                             master_cf=master_cf.text.splitlines())
    postfix.start()
    filter_daemon = None
    try:
        wait_for_port("127.0.0.1", 25)
        smtp_send(25, ["carol@sink.test"])(make_message(
            paragraph_text(4444, count=150), message_id="<nofilter@example.org>", crlf=True))
        postfix.wait_log(r"status=deferred \(connect to 127\.0\.0\.1\[127\.0\.0\.1\]:10025: "
                         r"Connection refused\)", timeout=60)
        assert postfix.deliveries() == [] and postfix.queue_size() == 1
        filter_daemon = Daemon(command.text, "smtpd-found-again")
        wait_for_port("127.0.0.1", 10025, 30)
        postfix.flush()
        (delivered,) = postfix.wait_for_delivery(1, timeout=60, settle=0.5)
        assert delivered.header("X-Dupfilter") == ["unique"]
        assert delivered.header("Message-ID") == ["<nofilter@example.org>"]
    finally:
        postfix.stop()
        if filter_daemon is not None:
            assert filter_daemon.stop() == 0, filter_daemon.text()


def test_content_filter_before_the_queue() -> None:
    proxy_cf = block("postfix-master", "proxy")
    reinjection = entry(block("postfix-master", "after-queue").text, "127.0.0.1:10026")
    # "With mode = "proxy" in [smtpd]"; reject shows the client is answered by the filter.
    CONFIG.write_text(CONFIG.read_text() + '\n[smtpd]\nmode = "proxy"\n\n'
                      '[smtpd.actions]\nduplicate = "reject"\n')
    (command,) = blocks("smtpd-daemon")
    filter_daemon = Daemon(command.text, "smtpd-proxy")
    try:
        wait_for_port("127.0.0.1", 10025, 30)
        postfix = PostfixHarness(WORK / "postfix-proxy",
                                 master_cf=[*proxy_cf.text.splitlines(), *reinjection])
        postfix.start()
        try:
            wait_for_port("127.0.0.1", 25)
            send = smtp_send(25, ["carol@sink.test"])
            raw = make_message(paragraph_text(4242, count=150), message_id="<proxy@example.org>",
                               crlf=True)
            send(raw)
            (delivered,) = postfix.wait_for_delivery(1)
            assert delivered.header("X-Dupfilter") == ["unique"]
            with pytest.raises(smtplib.SMTPDataError) as refused:
                send(raw)
            assert refused.value.smtp_code == 550
            assert refused.value.smtp_error.decode() == "5.7.1 Duplicate message refused"
        finally:
            postfix.stop()
    finally:
        assert filter_daemon.stop() == 0, filter_daemon.text()


# ------------------------------------------------------------------------------ delivery

def test_procmail_recipes_as_real_deliveries() -> None:
    for number, recipe in enumerate(blocks("procmail")):
        user = f"procmail{number}"
        home = ensure_user(user)
        (home / ".procmailrc").write_text(recipe.text)
        give(home / ".procmailrc", user)
        raw = make_message(paragraph_text(300 + number, count=150),
                           message_id=f"<procmail{number}@example.org>")
        for _ in range(2):
            done = subprocess.run(["procmail", "-d", user], input=raw, capture_output=True,
                                  timeout=60)
            assert done.returncode == 0, (recipe.where, done.stderr)
        assert len(list((home / "duplicates" / "new").iterdir())) == 1, recipe.where
        inbox = Path(f"/var/mail/{user}").read_bytes()        # the first copy only
        assert inbox.startswith(b"From ") and inbox.count(b"\nFrom ") == 0, recipe.where
        if "--tag" in recipe.text:
            assert b"\nX-Dupfilter: unique\n" in inbox, recipe.where


def test_sieve_scripts_with_extprograms() -> None:
    (config,) = blocks("dovecot-conf")
    where = "/etc/dovecot/conf.d/90-sieve-extprograms.conf"
    assert f"`{where}`" in config.path.read_text()
    Path(where).write_text(config.text)
    shown = sh("doveconf -n", cwd=Path("/")).stdout
    for line in config.lines():
        if "=" in line and "$" not in line:
            assert line.strip() in shown, line
    for protocol in ("lda", "lmtp"):
        assert re.search(rf"^protocol {protocol} {{\n  mail_plugins = .*\bsieve\b", shown,
                         re.M), shown
    # dupfilter in a virtual environment on no PATH that Dovecot or a mail user has
    # (issue 14): the wrappers must name it by its full path.
    venv = Path("/opt/dupfilter-venv")
    sh(f"python3 -m venv --system-site-packages {venv}")
    (wheel,) = (WORK / "wheels").glob("dupfilter_mail-*.whl")
    sh(f"{venv}/bin/pip install --no-deps --force-reinstall {wheel}")
    programs = block("system", "sieve-programs").text
    # Run where dupfilter is not on PATH: it says so, and the wrappers it leaves fail loudly.
    unfound = sh(programs, cwd=Path("/"), env=root_env(PATH="/usr/sbin:/usr/bin:/sbin:/bin"))
    assert "dupfilter is not on PATH: install it" in unfound.stderr, unfound.stderr
    lost = subprocess.run(["/usr/lib/dovecot/sieve-filter/dupfilter-tag"], input=b"x",
                          capture_output=True, timeout=30)
    assert lost.returncode == 75 and lost.stdout == b"", lost
    assert b"message not filtered" in lost.stderr
    # As written, with the virtual environment activated.
    sh(programs, cwd=Path("/"), env=root_env(PATH=f"{venv}/bin:{ROOT_PATH}"))
    for wrapper in ("sieve-filter/dupfilter-tag", "sieve-execute/dupfilter-check"):
        assert f"exec '{venv}/bin/dupfilter' --" in \
            Path("/usr/lib/dovecot", wrapper).read_text(), wrapper
    home = ensure_user("mailtest")
    scripts = blocks("sieve")
    assert len(scripts) == 2
    for number, script in enumerate(scripts):
        path = home / f"doc{number}.sieve"
        path.write_text(script.text)
        give(path, "mailtest")
        compiled = as_user("mailtest", ["sievec", str(path)])
        assert compiled.returncode == 0, (script.where, compiled.stderr)
        message = home / f"message{number}.eml"
        message.write_bytes(make_message(paragraph_text(400 + number, count=150),
                                         message_id=f"<sieve{number}@example.org>"))
        give(message, "mailtest")
        results = []
        for _ in range(2):
            done = as_user("mailtest", ["sieve-test", str(path), str(message)])
            assert done.returncode == 0, (script.where, done.stdout, done.stderr)
            results.append(done.stdout.decode())
        assert "store message in folder: INBOX" in results[0], (script.where, results[0])
        assert "Duplicates" not in results[0]
        assert "store message in folder: Duplicates" in results[1], (script.where, results[1])
    for number, script in enumerate(scripts):
        deliver_with_sieve_before(script, number, venv, home)


def lda(user: str, raw: bytes) -> subprocess.CompletedProcess[bytes]:
    """``dovecot-lda`` as the mail user (no -d: no auth service here), log on stderr."""
    return as_user(user, ["/usr/lib/dovecot/dovecot-lda", "-o", "log_path=/dev/stderr",
                          "-o", f"mail_location=maildir:/home/{user}/Maildir",
                          "-f", "ann@example.org"], data=raw)


def deliver_with_sieve_before(script, number: int, venv: Path, home: Path) -> None:  # noqa: ANN001
    """The script as the documented sieve_before, compiled as documented, in real
    deliveries: a copy filed into a Duplicates folder that did not exist, with its header;
    then with dupfilter gone, a clear error and the message kept in INBOX as it came."""
    target = Path("/etc/dovecot/sieve/dupfilter.sieve")
    assert f"`{target}`" in script.path.read_text()
    target.parent.mkdir(exist_ok=True)
    target.write_text(script.text)
    sh(block("system", "sieve-compile").text, cwd=Path("/"))
    maildir = home / "Maildir"
    shutil.rmtree(maildir, ignore_errors=True)
    raw = make_message(paragraph_text(450 + number, count=150),
                       message_id=f"<lda{number}@example.org>")
    logs = []
    for _ in range(2):
        done = lda("mailtest", raw)
        logs.append(done.stderr.decode())
        assert done.returncode == 0, (script.where, logs)
    (first,) = list((maildir / "new").iterdir())
    (second,) = list((maildir / ".Duplicates" / "new").iterdir())
    if "vnd.dovecot.filter" in script.text:
        assert re.findall(rb"^X-Dupfilter: .*$", first.read_bytes(), re.M) == \
            [b"X-Dupfilter: unique"], (logs, first.read_bytes()[:400])
        assert x_dupfilter(second.read_bytes()).startswith("duplicate;"), logs
    # dupfilter gone (an upgrade removed it): never unfiltered in silence, never emptied,
    # never filed by the X-Dupfilter header the message came with.
    binary = venv / "bin" / "dupfilter"
    binary.rename(binary.with_suffix(".moved"))
    try:
        forged = make_message(paragraph_text(460 + number, count=150),
                              message_id=f"<forged{number}@example.org>")
        forged = b"X-Dupfilter: duplicate; score=1.00\n" + forged
        done = lda("mailtest", forged)
        log = done.stderr.decode()
        assert done.returncode == 0, log
        name = "dupfilter-tag" if "vnd.dovecot.filter" in script.text else "dupfilter-check"
        assert f"{name}: cannot run '{binary}' as mailtest" in log, log
        assert "Execution of script /etc/dovecot/sieve/dupfilter.sieve failed" in log, log
        kept = [p for p in (maildir / "new").iterdir() if p != first]
        assert len(kept) == 1 and kept[0].read_bytes().endswith(forged), log
        assert len(list((maildir / ".Duplicates" / "new").iterdir())) == 1
    finally:
        binary.with_suffix(".moved").rename(binary)


def test_maildrop_recipe() -> None:
    (recipe,) = blocks("maildrop")
    home = ensure_user("maildropper")
    (home / ".mailfilter").write_text(recipe.text)
    give(home / ".mailfilter", "maildropper", 0o600)
    for command in (["maildirmake", "Maildir"], ["maildirmake", "-f", "Duplicates", "Maildir"]):
        assert as_user("maildropper", command).returncode == 0
    raw = make_message(paragraph_text(500, count=150), message_id="<maildrop@example.org>")
    for _ in range(2):
        done = subprocess.run(["maildrop", "-d", "maildropper"], input=raw,
                              capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr
    duplicates = list((home / "Maildir" / ".Duplicates" / "new").iterdir())
    assert len(duplicates) == 1
    assert x_dupfilter(duplicates[0].read_bytes()).startswith("duplicate;")
    first = list((home / "Maildir" / "new").iterdir()) or [Path("/var/mail/maildropper")]
    assert x_dupfilter(first[0].read_bytes()) == "unique"


def test_crontab_line_with_crons_environment() -> None:
    (example,) = blocks("crontab")
    home = ensure_user("mailtest")
    # What Debian's cron gives a job: these variables, then the crontab's assignments.
    env = {"SHELL": "/bin/sh", "PATH": "/usr/bin:/bin", "HOME": str(home),
           "LOGNAME": "mailtest"}
    jobs = 0
    for line in example.lines():
        assignment = re.match(r"^(\w+)\s*=\s*(.*)$", line)
        if assignment:
            env[assignment[1]] = assignment[2]
            continue
        fields = line.split(None, 5)
        assert len(fields) == 6, line
        for field, (low, high) in zip(fields[:5], ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7)),
                                      strict=True):
            assert cron_field_ok(field, low, high), (line, field)
        done = as_user("mailtest", ["/bin/sh", "-c", fields[5]], env=env)
        assert done.returncode == 0, (line, done.stderr)
        jobs += 1
    assert jobs == 1


def cron_field_ok(field: str, low: int, high: int) -> bool:
    """One time field of crontab(5): lists of *, numbers, ranges, with /steps."""
    for part in field.split(","):
        found = re.fullmatch(r"(\*|(\d+)(?:-(\d+))?)(?:/(\d+))?", part)
        if not found:
            return False
        numbers = [int(n) for n in found.groups()[1:3] if n is not None]
        if any(not low <= n <= high for n in numbers):
            return False
    return True


def test_full_disk_message_is_the_documented_one() -> None:
    (example,) = blocks("filter-stderr")
    documented = example.text.strip()
    store = Path(re.match(r"dupfilter: store (\S+): ", documented)[1])
    user = store.parts[2]                                   # /home/USER/...
    home = ensure_user(user)
    assert store.is_relative_to(home)
    state = store.parent
    state.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(state)],
                   check=True)
    try:
        give(state, user, 0o755)
        give(state.parent, user, 0o755)
        first = as_user(user, ["dupfilter", "--tag"],
                        data=make_message("hello " * 40, message_id="<disk@example.org>"))
        assert first.returncode == 0 and not first.stderr, first.stderr
        subprocess.run(["dd", "if=/dev/zero", f"of={state}/filler", "bs=4k"],
                       capture_output=True)                 # until the disk is full
        raw = make_message(paragraph_text(600, count=150), message_id="<full@example.org>")
        done = as_user(user, ["dupfilter", "--tag"], data=raw)
        assert done.returncode == 0
        assert done.stdout == b"X-Dupfilter: unique\n" + raw    # checked, tagged
        assert done.stderr.decode().strip() == documented
        # A copy of what was stored before the disk filled is still found.
        again = as_user(user, ["dupfilter", "--tag"],
                        data=make_message("hello " * 40, message_id="<disk2@example.org>"))
        assert again.returncode == 0 and again.stdout.startswith(b"X-Dupfilter: duplicate")
    finally:
        subprocess.run(["umount", str(state)], check=True)


def test_redis_store_settings() -> None:
    example = block("toml", "redis")
    url = urllib.parse.urlsplit(re.search(r'^path = "([^"]+)"', example.text, re.M)[1])
    assert url.scheme == "redis" and url.password and url.hostname and url.port
    with open("/etc/hosts", "a") as hosts:
        hosts.write(f"127.0.0.1 {url.hostname}\n")
    (WORK / "redis").mkdir()
    server = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(url.port), "--requirepass",
         url.password, "--save", "", "--appendonly", "no", "--dir", str(WORK / "redis")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port("127.0.0.1", url.port)
        config = WORK / "redis.toml"
        config.write_text(example.text)
        raw = make_message(paragraph_text(700, count=150), message_id="<redis@example.org>")
        headers = []
        for _ in range(2):
            done = subprocess.run(["dupfilter", "--config", str(config), "--tag"], input=raw,
                                  capture_output=True, env=root_env(), timeout=60)
            assert done.returncode == 0 and not done.stderr, done.stderr
            headers.append(x_dupfilter(done.stdout))
        assert headers[0] == "unique" and headers[1].startswith("duplicate;")
        stats = sh(f"dupfilter-db --config {config} stats", cwd=Path("/")).stdout
        masked = f"redis://:***@{url.hostname}:{url.port}{url.path}"
        assert masked in stats and url.password not in stats, stats
    finally:
        server.terminate()
        server.wait(10)


def test_install_on_debians_python_in_opt() -> None:
    """docs/install.md on a system as it was before the other docs installed anything (their
    user, settings, units and command links removed): a virtual environment on Debian's
    python3 in /opt/dupfilter, served the package and its dependencies from wheels (the
    package index, offline); then the milter as its unit starts it, dropping to the
    dupfilter user, which must read that Python; status; upgrade; uninstall."""
    from support.wheelhouse import wheelhouse
    forget_installation()
    house = WORK / "wheelhouse"
    house.mkdir(exist_ok=True)
    import tomllib
    build = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["build-system"]
    project = tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"]
    # The dependencies and what builds the source tree (pip builds it in an isolated
    # environment of its own, as on a fresh host), offline.
    wheelhouse(house, [*project["dependencies"], *project["optional-dependencies"]["milter"],
                       *build["requires"]])
    # The source tree where docs/install.md has it (a clone there, on a real host).
    source = Path("/usr/local/src/dupfilter")
    shutil.rmtree(source, ignore_errors=True)
    shutil.copytree(CHECKOUT, source, ignore=shutil.ignore_patterns(
        ".git", "__pycache__", "*.egg-info", "build", ".pytest_cache", ".ruff_cache"))
    env = {k: v for k, v in root_env(PIP_FIND_LINKS=str(house)).items()
           if k != "PIP_NO_BUILD_ISOLATION"}
    done = sh(block("system", "install-debian").text, cwd=Path("/"), env=env)
    assert "Successfully installed" in done.stdout and "dupfilter-mail" in done.stdout
    assert Path("/usr/share/bash-completion/bash_completion").exists()
    assert Path("/usr/local/bin/dupfilter-milter").resolve() == \
        Path("/opt/dupfilter/bin/dupfilter-milter")
    assert Path("/opt/dupfilter/bin/python3").resolve().is_relative_to("/usr/bin")
    # (root's PATH here starts with this Python's bin, whose share/man has its own copy)
    page = sh("man -w dupfilter-db && man -w dupfilter.toml", cwd=Path("/"),
              env=root_env(PATH=USER_PATH)).stdout
    # man finds it by the link in /usr/local/share/man or, through /usr/local/bin, in
    # /opt/dupfilter/share/man: either way, the environment's copy.
    assert re.search(r"^(/usr/local|/opt/dupfilter)/share/man/man1/dupfilter-db\.1$", page,
                     re.M), page
    done = sh(block("system", "install-system").text, cwd=Path("/"), env=env)
    assert "configuration is valid" in done.stdout
    verified = sh("systemd-analyze verify /etc/systemd/system/dupfilter-*", cwd=Path("/"))
    assert not verified.stderr.strip(), verified.stderr
    # The unit's command line, started as root with --user (no systemd as PID 1 here).
    unit = Path("/etc/systemd/system/dupfilter-milter.service").read_text()
    command = re.search(r"^ExecStart=(.*)$", unit, re.M)[1]
    Path("/run/dupfilter").mkdir(exist_ok=True)
    shutil.chown("/run/dupfilter", "dupfilter", "dupfilter")
    milter = Daemon(f"{command} --user dupfilter", "install-milter")
    socket_path = Path("/var/spool/postfix/dupfilter/milter.sock")
    try:
        milter.wait_until(socket_path.is_socket, f"no {socket_path}")
        milter.wait_until(lambda: Path("/run/dupfilter/dupfilter-milter.json").exists(),
                          "no status file")
        time.sleep(1)
        status = sh("dupfilter-db status dupfilter-milter", cwd=Path("/"), check=False)
        assert status.returncode == 0, status.stdout + status.stderr + milter.text()
        assert "as dupfilter" in status.stdout and "store      /var/lib/dupfilter: open" \
            in status.stdout, status.stdout
        # --user dropped every uid (real, effective, saved, file system) to dupfilter's.
        uids = next(line for line in Path(f"/proc/{milter.proc.pid}/status").read_text()
                    .splitlines() if line.startswith("Uid:")).split()[1:]
        assert {int(uid) for uid in uids} == {pwd.getpwnam("dupfilter").pw_uid}, uids
    finally:
        assert milter.stop() == 0, milter.text()
    assert "cannot read" not in milter.text(), milter.text()
    sh(block("system", "install-upgrade").text, cwd=Path("/"), env=env)
    sh(block("system", "install-uninstall").text, cwd=Path("/"), env=env)
    assert not Path("/opt/dupfilter").exists()
    assert not list(Path("/usr/local/bin").glob("dupfilter*"))


def test_no_process_left_behind() -> None:
    """Every daemon started here was stopped (the namespace would kill them anyway)."""
    time.sleep(0.5)
    left = subprocess.run(["ps", "-eo", "pid=,comm="], capture_output=True, text=True).stdout
    others = [line for line in left.splitlines()
              if line.split()[0] != "1" and line.split()[-1] not in ("ps",)]
    assert not [line for line in others if "master" in line or "dupfilter" in line], left

