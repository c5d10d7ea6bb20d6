"""``dupfilter-db config --check``'s checks of the system around the settings, as
``postfix check`` and ``rspamadm configtest`` do: the users and groups the settings name,
whether Postfix's user can reach the milter socket, and, with ``--postfix [DIR]``, Postfix's
own settings (``postconf -n``, ``postconf -M``) against dupfilter's.

Each check gives ``(ok, text)``; ``config --check`` prints them and exits 1 on a problem.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import shutil
import stat
import subprocess
from pathlib import Path

from mailfilter.config import (
    ConfigError,
    Settings,
    check_hostport,
    check_socket_group,
    parse_milter_socket,
)

Finding = tuple[bool, str]
POSTFIX_SPOOL = "/var/spool/postfix"


def _user(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def _groups_of(entry: pwd.struct_passwd) -> set[int]:
    return {entry.pw_gid} | {g.gr_gid for g in grp.getgrall() if entry.pw_name in g.gr_mem}


def _may(info: os.stat_result, entry: pwd.struct_passwd, groups: set[int], bits: int) -> bool:
    """Would ``entry`` have ``bits`` (an rwx triple, e.g. 0o1 search) on a file with
    ``info``?  (Classic Unix permissions; root may everything.)"""
    if entry.pw_uid == 0:
        return True
    if info.st_uid == entry.pw_uid:
        return bool(info.st_mode >> 6 & bits == bits)
    if info.st_gid in groups:
        return bool(info.st_mode >> 3 & bits == bits)
    return bool(info.st_mode & bits == bits)


def reachable_by(path: str, user: str) -> Finding:
    """Can ``user`` search every folder above ``path`` (and write the socket, if it is
    there)?  Says which folder stops it."""
    entry = _user(user)
    if entry is None:
        return False, f"user {user} does not exist"
    groups = _groups_of(entry)
    target = Path(path)
    for folder in [*reversed(target.parents)]:
        try:
            info = os.stat(folder)
        except FileNotFoundError:
            # Not an error in itself: the unit creates it at start (a milter started by
            # hand refuses to start without it, and says so).
            return True, (f"{folder} does not exist yet: the milter's unit creates it; by "
                          f"hand, install -d -o dupfilter -g "
                          f"{grp.getgrgid(entry.pw_gid).gr_name} -m 0750 {folder}")
        except OSError as error:
            return False, f"{folder}: {error.strerror}"
        if not _may(info, entry, groups, 0o1):
            return False, (f"{user} cannot reach {path}: no search permission on {folder} "
                           f"(mode {stat.S_IMODE(info.st_mode):04o}, owner "
                           f"{_name(pwd.getpwuid, info.st_uid)}, group "
                           f"{_name(grp.getgrgid, info.st_gid)})")
    try:
        info = os.stat(target)
    except FileNotFoundError:
        return True, f"{user} can reach the folder of {path} (the socket is not there yet)"
    if stat.S_ISSOCK(info.st_mode) and not _may(info, entry, groups, 0o2):
        return False, f"{user} cannot write the socket {path} (mode " \
                      f"{stat.S_IMODE(info.st_mode):04o})"
    return True, f"{user} can reach {path}"


def _name(lookup, number: int) -> str:  # noqa: ANN001
    try:
        return lookup(number)[0]
    except KeyError:
        return str(number)


def system_checks(settings: Settings, user: str | None, mta_user: str) -> list[Finding]:
    """Users, groups and folders the settings need on this machine (``user``: the daemons'
    --user; None: ``dupfilter`` when it exists)."""
    found: list[Finding] = []
    if user is None and _user("dupfilter") is not None:
        user = "dupfilter"
    milter = settings.milter
    if user:
        entry = _user(user)
        found.append((entry is not None, f"user {user} " + (
            "exists" if entry else "does not exist (useradd --system ...: docs/install.md)")))
        location = settings.store.location()
        if entry is not None and not location.startswith(("redis://", "rediss://", "unix://")):
            folder = Path(location)
            if folder.is_dir():
                info = folder.stat()
                writable = _may(info, entry, _groups_of(entry), 0o3)
                found.append((writable, f"store folder {folder}: " + (
                    f"{user} may write it" if writable else
                    f"{user} cannot write it (owner {_name(pwd.getpwuid, info.st_uid)}, mode "
                    f"{stat.S_IMODE(info.st_mode):04o}): chown {user}: {folder}")))
            else:
                found.append((True, f"store folder {folder} does not exist yet (systemd's "
                                    "StateDirectory= or the first message creates it)"))
    if milter.socket.startswith(("unix:", "local:")) and milter.socket_group:
        try:
            check_socket_group(settings)
            found.append((True, f"socket group {milter.socket_group} exists"))
        except ConfigError as error:
            found.append((False, str(error)))
    if milter.socket.startswith(("unix:", "local:")):
        path = milter.socket.split(":", 1)[1]
        if _user(mta_user) is None:
            found.append((True, f"no user {mta_user} here: socket access not checked"))
        else:
            found.append(reachable_by(path, mta_user))
    return found


# ------------------------------------------------------------------------------ Postfix

def _postconf(args: list[str]) -> str:
    postconf = shutil.which("postconf") or "/usr/sbin/postconf"
    done = subprocess.run([postconf, *args], capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise OSError(f"postconf {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.stdout


def _main_cf(directory: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in _postconf(["-c", directory, "-n"]).splitlines():
        name, _, value = line.partition(" = ")
        values[name.strip()] = value.strip()
    return values


def _master_cf(directory: str) -> list[dict[str, object]]:
    """master.cf services, each with its name, type, chroot flag and -o options."""
    services: list[dict[str, object]] = []
    for line in _postconf(["-c", directory, "-M"]).splitlines():
        fields = line.split()
        if len(fields) < 8:
            continue
        options: dict[str, str] = {}
        rest = fields[8:]
        for index, word in enumerate(rest):
            if word == "-o" and index + 1 < len(rest):
                name, _, value = rest[index + 1].partition("=")
                options[name] = value
        services.append({"name": fields[0], "type": fields[1], "chroot": fields[4],
                         "command": fields[7], "options": options})
    return services


def _milter_specs(value: str) -> list[str]:
    return [spec for spec in re.split(r"[\s,]+", value) if spec and not spec.startswith("{")]


def _same_milter(postfix_spec: str, ours: str, chrooted: bool) -> bool:
    try:
        theirs = parse_milter_socket(postfix_spec)
    except ValueError:
        return False
    if theirs.startswith(("unix:", "local:")):
        path = theirs.split(":", 1)[1]
        # A chrooted smtpd opens the path inside the chroot, the queue directory.
        candidates = {POSTFIX_SPOOL + path} if chrooted else {path}
        return ours.split(":", 1)[1] in candidates if ours.startswith(("unix:", "local:")) \
            else False
    return theirs == ours


def postfix_checks(settings: Settings, directory: str) -> list[Finding]:
    """Postfix's settings in ``directory`` against dupfilter's."""
    try:
        main = _main_cf(directory)
        master = _master_cf(directory)
    except (OSError, subprocess.SubprocessError) as error:
        return [(False, f"cannot read Postfix's settings: {error}")]
    found: list[Finding] = []
    smtpd = [s for s in master if s["command"] == "smtpd" and s["type"] == "inet"]
    chrooted = any(s["chroot"] in ("y", "-") for s in smtpd) if smtpd else False
    ours = settings.milter.socket
    for key in ("smtpd_milters", "non_smtpd_milters"):
        value = main.get(key, "")
        if not value:
            continue
        specs = _milter_specs(value.replace("$smtpd_milters", main.get("smtpd_milters", "")))
        if any(_same_milter(spec, ours, chrooted and key == "smtpd_milters")
               for spec in specs):
            found.append((True, f"{key} = {value}: dupfilter-milter's socket ({ours})"))
        else:
            hint = ""
            if chrooted and ours.startswith("unix:") and \
                    not ours.split(":", 1)[1].startswith(POSTFIX_SPOOL):
                hint = (f"; Postfix's smtpd runs chrooted in {POSTFIX_SPOOL} (master.cf): "
                        f"put the socket under it (unix:{POSTFIX_SPOOL}/dupfilter/milter.sock) "
                        "and name it relative to it (unix:/dupfilter/milter.sock)")
            found.append((False, f"{key} = {value} does not name dupfilter-milter's socket "
                                 f"{ours}{hint}"))
    if main.get("smtpd_milters") or main.get("non_smtpd_milters"):
        action = main.get("milter_default_action", "tempfail")
        found.append((action in ("tempfail", "accept"),
                      f"milter_default_action = {action}" + (
                          " (when the milter is down: clients retry)" if action == "tempfail"
                          else " (when the milter is down: mail passes unchecked)"
                          if action == "accept" else
                          ": mail would be refused or lost while the milter is down; use "
                          "tempfail or accept")))
    listen = settings.smtpd.listen
    filters = [(s["name"], s["options"].get("content_filter", "")) for s in master] + \
        [("main.cf", main.get("content_filter", ""))]
    proxies = [(s["name"], s["options"].get("smtpd_proxy_filter", "")) for s in master] + \
        [("main.cf", main.get("smtpd_proxy_filter", ""))]
    for where, value in filters:
        if not value:
            continue
        target = re.sub(r"^[^:]+:", "", value).replace("[", "").replace("]", "")
        same = _same_address(target, listen)
        found.append((same, f"{where}: content_filter = {value} " + (
            f"reaches dupfilter-smtpd ({listen})" if same else
            f"does not reach dupfilter-smtpd's listen = {listen}")))
        if same and settings.smtpd.mode != "after-queue":
            found.append((False, "content_filter is after the queue: smtpd.mode must be "
                                 "\"after-queue\""))
    for where, value in proxies:
        if not value:
            continue
        same = _same_address(value, listen)
        found.append((same, f"{where}: smtpd_proxy_filter = {value} " + (
            f"reaches dupfilter-smtpd ({listen})" if same else
            f"does not reach dupfilter-smtpd's listen = {listen}")))
        if same and settings.smtpd.mode != "proxy":
            found.append((False, "smtpd_proxy_filter is before the queue: smtpd.mode must be "
                                 "\"proxy\""))
    if any(v for _, v in filters + proxies):
        hop = settings.smtpd.next_hop
        back = [s for s in master if s["command"] == "smtpd" and _same_address(
            str(s["name"]), hop)]
        found.append((bool(back), f"next_hop = {hop}: " + (
            f"master.cf has the re-injection smtpd {back[0]['name']}" if back else
            "no smtpd in master.cf listens there (the re-injection service)")))
        for service in back:
            options = service["options"]
            if options.get("content_filter", "") != "":
                found.append((False, f"{service['name']}: content_filter is not cleared "
                                     "(-o content_filter=): mail would loop"))
            if "no_milters" not in options.get("receive_override_options", "") and \
                    main.get("smtpd_milters"):
                found.append((False, f"{service['name']}: receive_override_options lacks "
                                     "no_milters: mail would be filtered twice"))
    if not found:
        found.append((True, f"Postfix ({directory}) names no dupfilter milter or filter"))
    return found


def _same_address(value: str, listen: str) -> bool:
    try:
        host, port = check_hostport(value.strip())
        ours = check_hostport(listen)
    except ValueError:
        return False
    local = {"127.0.0.1", "localhost", "::1"}
    return port == ours[1] and (host == ours[0] or {host, ours[0]} <= local)
