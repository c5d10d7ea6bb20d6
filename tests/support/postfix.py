"""A private Postfix instance on loopback, for end-to-end tests and benchmarks.

Everything lives under one folder: config, queue, data, log, a virtual Maildir, and a
loopback SMTP sink.  Nothing touches the system Postfix (which may not even be configured).
Runs as root (Postfix's master needs it).

    pf = PostfixHarness(tmp_path, main_cf=["smtpd_milters = unix:/x.sock"])
    pf.start()
    pf.send(raw, "a@example.test", ["bob@sink.test", "carol@maildir.test"])
    got = pf.wait_for_delivery(2)
    pf.stop()

Recipients:
  ``*@sink.test``     relayed over SMTP to the loopback sink (``pf.sink``), kept in memory
                      (or only counted with ``keep=False``);
  ``USER@maildir.test`` for USER in ``maildir_users`` (alice, bob, carol, dave): delivered
                      by virtual(8) to ``ROOT/vmail/USER/`` (a Maildir, uid/gid 65534);
                      other users there are refused at RCPT.

Extra ``main_cf`` lines (``name = value``) override the defaults; extra ``master_cf`` lines
are appended as they are (add services: a content-filter loop, a second smtpd on another
port; pick ports with :func:`~support.ports.free_port`); :func:`filter_master_cf` gives
those of dupfilter-smtpd's loop.  ``{root}`` in either is replaced by the folder.

The folder: pass ``None`` (the default) for a fresh world-traversable one under /tmp, removed
by :meth:`stop`.  Postfix's queue may live anywhere root can reach, but two things need every
parent folder to be searchable by other users: Maildir delivery (virtual(8) writes as uid
65534) and a unix-socket milter or filter under ``root`` (smtpd connects as ``postfix``).
pytest's ``tmp_path`` is not (``/tmp/pytest-of-root`` is 0700).
"""

from __future__ import annotations

import os
import re
import shutil
import smtplib
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from .ports import free_port, wait_for_port
from .smtp_sink import Delivery, SmtpSink

POSTFIX = shutil.which("postfix") or "/usr/sbin/postfix"
POSTCONF = shutil.which("postconf") or "/usr/sbin/postconf"
POSTQUEUE = shutil.which("postqueue") or "/usr/sbin/postqueue"
POSTSUPER = shutil.which("postsuper") or "/usr/sbin/postsuper"
POSTKICK = shutil.which("postkick") or "/usr/sbin/postkick"
SENDMAIL = "/usr/sbin/sendmail"       # Postfix's sendmail(1) (postdrop into the maildrop)
VMAIL_UID = 65534
SINK_DOMAIN = "sink.test"
MAILDIR_DOMAIN = "maildir.test"

# Debian's services with chroot off; smtpd's listener is prepended by the harness.
_MASTER_CF = """\
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
tlsmgr    unix  -       -       n       1000?   1       tlsmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
proxywrite unix -       -       n       -       1       proxymap
smtp      unix  -       -       n       -       -       smtp
relay     unix  -       -       n       -       -       smtp
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
local     unix  -       n       n       -       -       local
virtual   unix  -       n       n       -       -       virtual
lmtp      unix  -       -       n       -       -       lmtp
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
"""


def _delivery_order(path: Path) -> tuple[int, int, str]:
    """Sort key for Postfix's Maildir names ``SEC.VdevIinodeMusec.host``: by delivery time.

    The plain name sorts two copies delivered in the same second by their inode number,
    which is arbitrary, so "the last copy" was sometimes the first one."""
    found = re.match(r"(\d+)\.V[0-9a-f]+I[0-9a-f]+M(\d+)\.", path.name)
    if found is None:
        return (0, 0, path.name)
    return (int(found.group(1)), int(found.group(2)), path.name)


class PostfixHarness:
    """A private Postfix (master in the foreground) under ``root``; see the module doc."""

    def __init__(self, root: str | os.PathLike[str] | None = None, main_cf: Iterable[str] = (),
                 master_cf: Iterable[str] = (), *, port: int | None = None,
                 keep: bool = True, smtpd_options: Sequence[str] = (),
                 maildir_users: Sequence[str] = ("alice", "bob", "carol", "dave")) -> None:
        self._own_root = root is None
        if root is None:
            # World-traversable, unlike pytest's tmp_path: see the module doc.
            root = tempfile.mkdtemp(prefix="pfharness-")
            os.chmod(root, 0o755)
        self.root = Path(root).absolute()
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.etc = self.root / "etc"
        self.vmail = self.root / "vmail"
        self.logfile = self.root / "log" / "maillog"
        self.extra_main = [line.replace("{root}", str(self.root)) for line in main_cf]
        self.extra_master = [line.replace("{root}", str(self.root)) for line in master_cf]
        self.smtpd_options = list(smtpd_options)
        self.maildir_users = tuple(maildir_users)
        self.sink = SmtpSink(self.host, keep=keep)
        self._master: subprocess.Popen[bytes] | None = None

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> PostfixHarness:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self, timeout: float = 30.0) -> None:
        """Write the config, start the sink and Postfix; return once smtpd answers."""
        self.sink.start()
        for sub in ("etc", "spool", "data", "log", "vmail"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        os.chown(self.root / "data", _uid("postfix"), -1)
        os.chown(self.vmail, VMAIL_UID, VMAIL_UID)
        self.root.chmod(0o755)
        (self.etc / "main.cf").write_text(self._main_cf())
        (self.etc / "master.cf").write_text(self._master_cf())
        self._postfix("check")
        out = open(self.root / "log" / "master.out", "ab")
        self._master = subprocess.Popen([POSTFIX, "-c", str(self.etc), "start-fg"],
                                        stdout=out, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL)
        out.close()
        try:
            wait_for_port(self.host, self.port, timeout)
        except TimeoutError:
            self.stop()
            raise RuntimeError(f"Postfix did not start; see {self.root}/log") from None

    def stop(self) -> None:
        """Stop Postfix (waiting for the master to exit) and the sink."""
        if self._master is not None:
            subprocess.run([POSTFIX, "-c", str(self.etc), "stop"], capture_output=True,
                           timeout=30)
            try:
                self._master.wait(20)
            except subprocess.TimeoutExpired:
                self._master.kill()
                self._master.wait(5)
            self._master = None
        self.sink.stop()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def postconf(self, *settings: str, reload: bool = True) -> None:
        """``postconf -e`` each ``name = value``; then reload (and settle ~1 s)."""
        if settings:
            subprocess.run([POSTCONF, "-c", str(self.etc), "-e", *settings], check=True,
                           capture_output=True)
        if reload:
            self.reload()

    def reload(self, settle: float = 1.0, timeout: float = 10.0) -> None:
        """``postfix reload``; return once the daemons of the old configuration are gone.

        The daemons running at the reload (an idle smtpd among them) keep the listening
        sockets and the old settings until they get round to exiting: a connection made
        before that may still be served the old way.  So wait (up to ``timeout``) until
        every one of them has exited, then ``settle`` a moment longer."""
        old = self._daemon_pids()
        self._postfix("reload")
        deadline = time.monotonic() + timeout
        while old & self._daemon_pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(settle)

    def _daemon_pids(self) -> set[int]:
        """PIDs of the master's live child processes (the Postfix daemons) right now."""
        try:
            master = int((self.root / "spool" / "pid" / "master.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return set()
        found = set()
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            state, ppid = stat.rsplit(")", 1)[1].split()[:2]
            if int(ppid) == master and state != "Z":
                found.add(int(entry.name))
        return found

    def flush(self) -> None:
        """Retry deferred mail now (postqueue -f)."""
        subprocess.run([POSTQUEUE, "-c", str(self.etc), "-f"], capture_output=True,
                       check=False)

    def postsuper(self, *args: str) -> str:
        """Run ``postsuper -c ETC ARGS`` (e.g. ``-d ALL``, ``-H ALL``); returns its output."""
        done = subprocess.run([POSTSUPER, "-c", str(self.etc), *args], capture_output=True,
                              text=True, check=False)
        return done.stdout + done.stderr

    def queue(self) -> list[dict[str, object]]:
        """The queue as ``postqueue -j`` reports it (one dict per message)."""
        import json
        done = subprocess.run([POSTQUEUE, "-c", str(self.etc), "-j"], capture_output=True,
                              text=True, check=False)
        return [json.loads(line) for line in done.stdout.splitlines()
                if line.strip().startswith("{")]

    def queue_size(self) -> int:
        """Messages in Postfix's queue (any state)."""
        done = subprocess.run([POSTQUEUE, "-c", str(self.etc), "-j"], capture_output=True,
                              text=True, check=False)
        return sum(1 for line in done.stdout.splitlines() if line.strip().startswith("{"))

    # ------------------------------------------------------------------ mail

    def smtp(self, timeout: float = 30.0, port: int | None = None) -> smtplib.SMTP:
        """An open smtplib connection to the instance's smtpd, or to another listener of
        it on ``port`` (caller quits it)."""
        return smtplib.SMTP(self.host, port or self.port, local_hostname="client.harness.test",
                            timeout=timeout)

    def send(self, raw: bytes | str, sender: str, recipients: Sequence[str],
             port: int | None = None) -> dict[str, tuple[int, bytes]]:
        """Send one message (to ``port``, default the main smtpd); returns the refused
        recipients; raises smtplib errors."""
        data = raw.encode("utf-8") if isinstance(raw, str) else raw
        with self.smtp(port=port) as client:
            return client.sendmail(sender, list(recipients), data)

    def submit(self, raw: bytes, sender: str, recipients: Sequence[str]) -> None:
        """Submit as a local program does: Postfix's sendmail(1) puts the message in the
        maildrop queue and pickup(8) hands it to cleanup (non-SMTP mail, which goes through
        ``non_smtpd_milters``).  ``raw`` should have LF line ends, as sendmail(1) expects.
        Pickup may take up to a minute (see :meth:`kick_pickup`): wait longer than that."""
        done = subprocess.run([SENDMAIL, "-C", str(self.etc), "-i", "-f", sender, "--",
                               *recipients], input=raw, capture_output=True, timeout=30)
        if done.returncode:
            raise RuntimeError(f"sendmail exited {done.returncode}: {done.stderr!r}")
        self.kick_pickup()     # postdrop kicks pickup too, but gives up at once on failure

    def kick_pickup(self, timeout: float = 5.0) -> bool:
        """Ask pickup(8) to scan the maildrop queue now (it otherwise looks once a minute);
        False if the kick did not go through.

        Best effort: for a while after a ``postfix reload`` postkick dies of SIGPIPE (no
        reader on pickup's FIFO) about one time in three, here for up to 10 s; pickup's own
        scan still comes, so callers wait longer than a minute for what it brings."""
        deadline = time.monotonic() + timeout
        while True:
            done = subprocess.run([POSTKICK, "-c", str(self.etc), "public", "pickup", "W"],
                                  capture_output=True, timeout=30)
            if done.returncode == 0:
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)

    def deliveries(self, recipient: str | None = None) -> list[Delivery]:
        """Everything delivered so far (sink, then Maildirs), optionally for one address."""
        found = list(self.sink.messages) + self._maildir_messages()
        if recipient is None:
            return found
        want = recipient.lower()
        return [d for d in found if want in (r.lower() for r in d.recipients)]

    def wait_for_delivery(self, count: int = 1, *, recipient: str | None = None,
                          timeout: float = 30.0, settle: float = 0.0) -> list[Delivery]:
        """Wait until ``count`` copies (for ``recipient``, or in all) were delivered.

        ``settle`` keeps waiting that long afterwards, to catch unexpected extra copies.
        Raises :class:`TimeoutError` with the tail of the mail log.
        """
        deadline = time.monotonic() + timeout
        while len(self.deliveries(recipient)) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{len(self.deliveries(recipient))}/{count} delivered"
                    f"{' to ' + recipient if recipient else ''} after {timeout}s; "
                    f"log tail:\n{self.log_tail()}")
            time.sleep(0.05)
        if settle:
            time.sleep(settle)
        return self.deliveries(recipient)

    def wait_queue_empty(self, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.queue_size() == 0:
                return True
            time.sleep(0.2)
        return False

    def log_text(self) -> str:
        try:
            return self.logfile.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def wait_log(self, pattern: str, timeout: float = 15.0, start: int = 0) -> re.Match[str]:
        """Wait for a regex in the mail log (from character offset ``start``)."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while True:
            found = regex.search(self.log_text(), start)
            if found:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"{pattern!r} not in the mail log:\n{self.log_tail()}")
            time.sleep(0.1)

    def clear(self) -> None:
        """Forget delivered mail (sink memory and Maildir files)."""
        self.sink.reset()
        for path in self.vmail.glob("*/*/*"):
            if path.is_file():
                path.unlink()

    # ------------------------------------------------------------------ internals

    def _maildir_messages(self) -> list[Delivery]:
        found = []
        for path in sorted(self.vmail.glob("*/new/*"), key=_delivery_order):
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            user = path.parent.parent.name
            sender = ""
            first = data.split(b"\n", 1)[0].decode("utf-8", "replace")
            if first.lower().startswith("return-path:"):
                sender = first.split(":", 1)[1].strip().strip("<>")
            found.append(Delivery("maildir", sender, (f"{user}@{MAILDIR_DOMAIN}",), data))
        return found

    def _main_cf(self) -> str:
        root = str(self.root)
        settings = {
            "compatibility_level": "3.6",
            "queue_directory": f"{root}/spool",
            "data_directory": f"{root}/data",
            "myhostname": "mx.harness.test",
            "mydomain": "harness.test",
            "myorigin": "$myhostname",
            "mydestination": "$myhostname, localhost",
            "inet_interfaces": "127.0.0.1",
            "inet_protocols": "ipv4",
            "mynetworks": "127.0.0.0/8",
            "smtpd_relay_restrictions": "permit_mynetworks, reject_unauth_destination",
            "maillog_file": f"{root}/log/maillog",
            "maillog_file_prefixes": f"/var, /dev/stdout, {root}",
            "alias_maps": "",
            "alias_database": "",
            "biff": "no",
            "disable_dns_lookups": "yes",
            "smtp_dns_support_level": "disabled",
            "relay_domains": SINK_DOMAIN,
            "transport_maps": f"inline:{{ {SINK_DOMAIN}=smtp:[127.0.0.1]:{self.sink.port} }}",
            "virtual_mailbox_domains": MAILDIR_DOMAIN,
            "virtual_mailbox_base": f"{root}/vmail",
            "virtual_mailbox_maps": "inline:{ " + ", ".join(
                f"{user}@{MAILDIR_DOMAIN}={user}/" for user in self.maildir_users) + " }",
            "virtual_uid_maps": f"static:{VMAIL_UID}",
            "virtual_gid_maps": f"static:{VMAIL_UID}",
            "queue_run_delay": "1s",
            "minimal_backoff_time": "1s",
            "maximal_backoff_time": "2s",
            "smtp_connection_cache_on_demand": "yes",
        }
        for line in self.extra_main:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            name, eq, value = line.partition("=")
            if not eq:
                raise ValueError(f"main.cf line without '=': {line!r}")
            settings[name.strip()] = value.strip()
        return "".join(f"{name} = {value}\n" for name, value in settings.items())

    def _master_cf(self) -> str:
        smtpd = f"{self.host}:{self.port} inet  n       -       n       -       -       smtpd\n"
        smtpd += "".join(f"  -o {option}\n" for option in self.smtpd_options)
        extra = "".join(line.rstrip("\n") + "\n" for line in self.extra_master)
        return smtpd + _MASTER_CF + extra

    def _postfix(self, command: str) -> None:
        done = subprocess.run([POSTFIX, "-c", str(self.etc), command], capture_output=True,
                              text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"postfix {command} failed ({done.returncode}): "
                               f"{done.stderr.strip()} {self.log_tail(10)}")


def _uid(user: str) -> int:
    import pwd
    return pwd.getpwnam(user).pw_uid


# ---------------------------------------------------------- dupfilter-smtpd's filter loop

def filter_master_cf(filter_port: int, reinject_port: int, proxy_port: int | None = None,
                     proxy_filter_port: int | None = None, *, entry_port: int | None = None,
                     maxproc: int = 10) -> list[str]:
    """master.cf lines of the filter loop (docs/postfix.md shows the same entries).

    ``entry_port``: an extra entry smtpd (no milters) whose content_filter is the filter,
    for an instance whose main listener does something else.  ``proxy_port`` and
    ``proxy_filter_port``: the before-queue proxy entry too.  ``maxproc``: processes of the
    scan and re-injection services (dupfilter-smtpd's ``--connections`` should not exceed it).
    """
    lines = []
    if entry_port is not None:
        lines += [f"127.0.0.1:{entry_port} inet n  -       n       -       -       smtpd",
                  f"  -o content_filter=scan:[127.0.0.1]:{filter_port}",
                  "  -o receive_override_options=no_address_mappings",
                  "  -o smtpd_milters="]
    if proxy_port is not None and proxy_filter_port is not None:
        lines += [f"127.0.0.1:{proxy_port} inet n  -       n       -       10      smtpd",
                  f"  -o smtpd_proxy_filter=127.0.0.1:{proxy_filter_port}",
                  "  -o smtpd_client_connection_count_limit=10"]
    return lines + [
        f"scan      unix  -       -       n       -       {maxproc}      smtp",
        "  -o smtp_send_xforward_command=yes",
        "  -o disable_mime_output_conversion=yes",
        "  -o smtp_generic_maps=",
        f"127.0.0.1:{reinject_port} inet n  -       n       -       {maxproc}      smtpd",
        *reinjection_options(),
    ]


def reinjection_options(recipient_restrictions: str = "$reinject_recipient_restrictions"
                        ) -> list[str]:
    """The ``-o`` lines of a re-injection smtpd: no content filter and none of the checks
    the entry smtpd already made, XFORWARD trusted from loopback."""
    return [
        "  -o content_filter=",
        "  -o receive_override_options=no_unknown_recipient_checks,no_header_body_checks,"
        "no_milters",
        "  -o smtpd_helo_restrictions=",
        "  -o smtpd_client_restrictions=",
        "  -o smtpd_sender_restrictions=",
        "  -o smtpd_relay_restrictions=",
        f"  -o smtpd_recipient_restrictions={recipient_restrictions}",
        "  -o mynetworks=127.0.0.0/8",
        "  -o smtpd_authorized_xforward_hosts=127.0.0.0/8",
    ]
