"""A private Dovecot IMAP server on loopback for the dedupe tests (Debian's dovecot-core and
dovecot-imapd): its own config, state and log under a scratch folder, a self-signed
certificate for 127.0.0.1, IMAPS and IMAP+STARTTLS, one user with a password file, mail in
Maildir++ owned by ``nobody`` (Dovecot refuses to serve mail as root)."""

from __future__ import annotations

import os
import pwd
import shutil
import ssl
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from imapclient import IMAPClient

from support.ports import free_port, wait_for_port

USER, PASSWORD = "alice", "correct horse battery staple"
MAIL_USER = "nobody"


@dataclass
class Dovecot:
    root: Path
    imaps_port: int
    imap_port: int
    process: subprocess.Popen
    ca_file: Path
    password_file: Path

    @property
    def maildir(self) -> Path:
        return self.root / "home" / USER / "Maildir"

    def url(self, folder: str = "", *, starttls: bool = False) -> str:
        if starttls:
            return f"imap://{USER}@127.0.0.1:{self.imap_port}/{folder}"
        return f"imaps://{USER}@127.0.0.1:{self.imaps_port}/{folder}"

    def doveadm(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["doveadm", "-c", str(self.root / "dovecot.conf"), *args],
                              capture_output=True, text=True, check=True)

    def log(self) -> str:
        path = self.root / "log" / "dovecot.log"
        return path.read_text() if path.exists() else ""

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _certificate(root: Path) -> tuple[Path, Path]:
    cert, key = root / "cert.pem", root / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


def start(root: Path, capabilities: str | None = None, prefix: str = "") -> Dovecot:
    """Start Dovecot in the foreground (``-F``) with everything under ``root``;
    ``capabilities``: what it announces after login instead of its own list (a server
    without MOVE, say); ``prefix``: the personal namespace's (``INBOX.`` as Courier's and
    Cyrus's)."""
    root.mkdir(parents=True, exist_ok=True)
    for sub in ("run", "state", "log"):
        (root / sub).mkdir(exist_ok=True)
    os.chmod(root, 0o755)
    cert, key = _certificate(root)
    nobody = pwd.getpwnam(MAIL_USER)
    home = root / "home" / USER
    (home / "Maildir").mkdir(parents=True, exist_ok=True)
    for path in (root / "home", home, home / "Maildir"):
        os.chown(path, nobody.pw_uid, nobody.pw_gid)
    (root / "passwd").write_text(f"{USER}:{{PLAIN}}{PASSWORD}\n")
    password_file = root / "password"
    password_file.write_text(PASSWORD + "\n")
    password_file.chmod(0o600)
    imaps_port, imap_port = free_port(), free_port()
    (root / "dovecot.conf").write_text(f"""\
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/log/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = required
ssl_cert = <{cert}
ssl_key = <{key}
auth_mechanisms = plain
default_internal_user = dovecot
default_login_user = dovenull
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {root}/passwd
}}
userdb {{
  driver = static
  args = uid={nobody.pw_uid} gid={nobody.pw_gid} home={root}/home/%u
}}
mail_location = maildir:~/Maildir
{f"imap_capability = {capabilities}" if capabilities else ""}
namespace inbox {{
  inbox = yes
  separator = .
  prefix = {prefix}
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap_port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {imaps_port}
    ssl = yes
  }}
}}
service stats {{
  unix_listener stats-writer {{
    mode = 0666
  }}
}}
""")
    process = subprocess.Popen(["dovecot", "-F", "-c", str(root / "dovecot.conf")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for_port("127.0.0.1", imaps_port, timeout=20)
        wait_for_port("127.0.0.1", imap_port, timeout=20)
    except TimeoutError:
        process.kill()
        raise RuntimeError(f"dovecot did not start: {process.stderr.read().decode()}"
                           f"{(root / 'log' / 'dovecot.log').read_text()}") from None
    return Dovecot(root, imaps_port, imap_port, process, cert, password_file)


def fill(server: Dovecot, folder: str, messages: dict[str, bytes]) -> None:
    """Deliver the messages into ``folder`` in name order, over IMAP APPEND (the server
    assigns the UIDs and keeps its index right), with their Date as INTERNALDATE."""
    context = ssl.create_default_context(cafile=str(server.ca_file))
    with IMAPClient("127.0.0.1", port=server.imaps_port, ssl=True,
                    ssl_context=context) as client:
        client.login(USER, PASSWORD)
        if folder != "INBOX" and not client.folder_exists(folder):
            client.create_folder(folder)
        for _name, raw in sorted(messages.items()):
            client.append(folder, raw)


def clear_keyword(server: Dovecot, folder: str, keyword: str) -> None:
    """Take ``keyword`` off every message of ``folder`` (a bench runs its tools on one
    folder in turn)."""
    context = ssl.create_default_context(cafile=str(server.ca_file))
    with IMAPClient("127.0.0.1", port=server.imaps_port, ssl=True,
                    ssl_context=context) as client:
        client.login(USER, PASSWORD)
        client.select_folder(folder)
        uids = client.search(["ALL"])
        if uids:
            client.remove_flags(uids, [keyword.encode()], silent=True)


def folder_messages(server: Dovecot, folder: str) -> list[tuple[int, bytes, tuple[bytes, ...]]]:
    """(UID, bytes, flags) of every message in ``folder``, as a client sees it."""
    context = ssl.create_default_context(cafile=str(server.ca_file))
    with IMAPClient("127.0.0.1", port=server.imaps_port, ssl=True,
                    ssl_context=context) as client:
        client.login(USER, PASSWORD)
        if not client.folder_exists(folder):
            return []
        client.select_folder(folder, readonly=True)
        uids = client.search(["ALL"])
        fetched = client.fetch(uids, ["BODY.PEEK[]", "FLAGS"]) if uids else {}
        return [(uid, item[b"BODY[]"], tuple(item[b"FLAGS"]))
                for uid, item in sorted(fetched.items())]


def wait_gone(process: subprocess.Popen, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)


def available() -> str | None:
    """Why the Dovecot tests cannot run here (None when they can)."""
    if shutil.which("dovecot") is None and not Path("/usr/sbin/dovecot").exists():
        return "dovecot (Debian package dovecot-core)"
    if not Path("/usr/lib/dovecot/imap").exists():
        return "Dovecot's IMAP server (Debian package dovecot-imapd)"
    return None
