"""TOML file → typed settings.  Every default of dupfilter lives here, once.

The search order for the file is: ``--config``, ``$DUPFILTER_CONFIG``, the user's config
directory (``$XDG_CONFIG_HOME/dupfilter/dupfilter.toml``), then
``/etc/dupfilter/dupfilter.toml``.  A missing file means all defaults; an unknown key or a
bad value is a :class:`ConfigError` that names the key, the file and the line.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, NoReturn

from mailfilter.names import MILTER_ACTIONS, ON_ERROR, SMTPD_ACTIONS, VERDICTS, Action, Kind

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
SYSTEM_CONFIG = Path("/etc/dupfilter/dupfilter.toml")


class ConfigError(ValueError):
    """A configuration problem, worded for the postmaster (file, line, key)."""


def parse_duration(text: str | int | float) -> float:
    """'30d', '12h', '90m', '45s' or a number of seconds → seconds."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text < 0:
            raise ValueError("a duration cannot be negative")
        return float(text)
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", str(text))
    if not match:
        raise ValueError(f"{text!r} is not a duration like 30d, 12h, 90m or 45s")
    unit = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}[match.group(2)]
    return float(match.group(1)) * unit


def default_state_dir() -> Path:
    """Per-user store location (XDG state directory), used by the procmail filter."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state")
    return Path(base) / "dupfilter"


@dataclass
class StoreSettings:
    """Where the memory of seen mail lives and how long it is kept."""

    # A folder means LMDB; a redis:// URL means Redis.  Empty: the per-user state dir.
    path: str = ""
    # LMDB map size to start with (MiB); the map grows by itself when full.
    map_size_mb: int = 64
    # Records older than this are removed by `dupfilter-db prune` (and Redis TTL).
    retention: str = "30d"
    # File mode of the LMDB files (0600: only the owner; 0660 for a shared group).
    file_mode: str = "0600"
    # Redis: prefix of every key, and socket timeout in seconds.
    key_prefix: str = "dupfilter:"
    timeout: float = 2.0

    def location(self) -> str:
        return self.path or str(default_state_dir())

    def retention_seconds(self) -> float:
        return parse_duration(self.retention)


@dataclass
class FingerprintSettings:
    """Parameters of the fingerprints.  A store remembers them and refuses others."""

    # "decoded": histogram over the canonical text; "raw": over the raw body bytes, as chisto.
    histogram: str = "decoded"
    # Words per shingle (seed 001 uses 5).
    ngram: int = 5
    # Bottom-k sketch size: how many of the smallest shingle hashes a record keeps.
    sketch_size: int = 64
    # How many of the smallest sketch hashes are indexed for candidate lookup.
    index_size: int = 24
    # Words removed before shingling (seed 001's optional stoplist).
    stoplist: list[str] = field(default_factory=list)
    # Only this much of a body is fingerprinted (bounded time and memory on huge mail).
    max_body_bytes: int = 4 * 1024 * 1024
    # Attachment chunking (FastCDC) average chunk size in bytes, and chunks kept per record.
    chunk_average: int = 4096
    chunk_sample: int = 32

    def store_parameters(self) -> dict[str, Any]:
        """The parameters a store is bound to (changing one makes old records meaningless)."""
        return {"histogram": self.histogram, "ngram": self.ngram,
                "sketch_size": self.sketch_size, "index_size": self.index_size,
                "stoplist": sorted(set(self.stoplist)), "chunk_average": self.chunk_average,
                "chunk_sample": self.chunk_sample, "hash": "token-xxh3-weighted-fmix64-top32-v4"}


@dataclass
class DetectorSettings:
    """When a message counts as a duplicate or a near-duplicate (see docs/thresholds.md)."""

    # Estimated shingle resemblance at or above which a message is a near-duplicate.
    resemblance_threshold: float = 0.35
    # The same threshold when both messages come from one sender under one subject (a
    # resend with its typos fixed), and when they come from one sender domain under
    # different subjects with no thread between them (two messages sharing a template,
    # a newsletter's masthead, a signature block).
    same_subject_threshold: float = 0.2
    other_subject_threshold: float = 0.7
    # Mail two programs sent (cron, monitoring, notifiers: Auto-Submitted, X-Cron-Env, a
    # root@/noreply@ address) is a near-duplicate only this alike and with the very same
    # data: a report that changed in one line is a new report.
    automated_threshold: float = 0.9
    # Bodies with fewer words than this are matched exactly only (digest, Message-ID).
    min_words: int = 12
    # Seed 000's rule: a histogram in the ±window sum range differing in ≤ max_positions bins.
    histogram_rule: bool = True
    histogram_window: int = 2
    histogram_max_positions: int = 2
    # The histogram rule applies only to bodies with at least this many counted characters
    # (long enough that the histogram is scaled and two bins rarely collide by chance).
    histogram_min_chars: int = 2000
    # Attachment similarity (seed 004 formula 1) at or above which attachments match.
    attachment_threshold: float = 0.8
    # A same Message-ID counts as a duplicate.
    match_message_id: bool = True
    # "recipient": a duplicate for whoever already received it; "global": for everyone.
    scope: str = "recipient"
    # Index postings read per sketch hash (common shingles must not flood the lookup).
    posting_cap: int = 48
    # Candidates scored per check, the ones sharing most sketch hashes first.
    max_candidates: int = 24
    # Of those, at most this many found by the histogram rule: the closest (then oldest).
    # Each is a near-duplicate on its own; a large store holds hundreds of near-identical
    # histograms in one window, and weighing them all would make checks grow with it.
    histogram_candidates: int = 8
    # A shingle that this many *different* stored texts share is boilerplate (a list footer,
    # a disclaimer, a banner): it is left out of resemblance and candidate lookup.  Copies
    # of one text (a campaign, a newsletter's personalised copies) count once.
    common_postings: int = 8
    # A near-duplicate at least this alike (or an exact, histogram or calendar match) is a
    # copy of its match's text: it joins that text's cluster (counted once for
    # boilerplate; its recipients filed under the cluster).  Below it, another text.
    copy_threshold: float = 0.8
    # Near-duplicates from one sender domain must agree on their data (numbers, codes,
    # dates, host names): templated mail with new data is a new message.
    compare_identifiers: bool = True
    # Attachments decide (same attachment: near-duplicate) when they make up at least this
    # share of both messages' bytes, whatever the cover note says.
    attachment_share: float = 0.5
    # A file mapping addresses to mailboxes (mailfilter/aliases.py): several addresses of
    # one person count as one recipient.  Empty: none.
    aliases: str = ""


@dataclass
class ActionSettings:
    """What a daemon does for each verdict."""

    unique: str = Action.TAG.value
    duplicate: str = Action.TAG.value
    near_duplicate: str = Action.TAG.value

    def for_verdict(self, verdict: str) -> str:
        return getattr(self, Kind(verdict).key)


@dataclass
class MilterSettings:
    """dupfilter-milter (pymilter)."""

    # libmilter's inet:PORT@HOST (Postfix's inet:HOST:PORT is accepted and rewritten to it),
    # inet6:PORT@IPV6, unix:/path or local:/path; always with a host (see parse_milter_socket).
    socket: str = "inet:8890@127.0.0.1"
    socket_mode: str = "0660"
    socket_group: str = "postfix"
    # Seconds libmilter waits on the MTA before giving up on a connection.
    timeout: int = 600
    on_error: str = Action.ACCEPT.value
    reject_message: str = "Duplicate message refused"
    quarantine_reason: str = "dupfilter: duplicate"
    # Only this much of a body is kept in memory for fingerprinting.
    max_body_bytes: int = 4 * 1024 * 1024
    actions: ActionSettings = field(default_factory=ActionSettings)


@dataclass
class SmtpdSettings:
    """dupfilter-smtpd (aiosmtpd content filter)."""

    listen: str = "127.0.0.1:10025"
    next_hop: str = "127.0.0.1:10026"
    mode: str = "after-queue"
    max_message_bytes: int = 50 * 1024 * 1024
    timeout: float = 300.0
    on_error: str = Action.ACCEPT.value
    reject_message: str = "Duplicate message refused"
    actions: ActionSettings = field(default_factory=ActionSettings)


@dataclass
class AnalysisSettings:
    """The work budget (mailfilter/workers.py): in the daemons, a message of
    ``offload_bytes`` or more is analysed in one of ``workers`` processes, for at most
    ``deadline`` seconds; the pipe filter analyses its message under a timer of
    ``deadline`` seconds (mailfilter/cli/pipe.py)."""

    deadline: float = 2.0
    workers: int = 2
    offload_bytes: int = 128 * 1024


@dataclass
class PolicySettings:
    """Allow rules for mail that legitimately repeats (see mailfilter/policy.py)."""

    # e.g. [{ name = "cron", field = "from", pattern = "^cron@", action = "skip" }]
    rules: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class MetricsSettings:
    """Prometheus endpoint of the daemons."""

    enabled: bool = False
    # HOST:PORT of /metrics; loopback unless you mean otherwise.
    listen: str = "127.0.0.1:9464"


@dataclass
class LogSettings:
    # "stderr" (journald) or "syslog".
    target: str = "stderr"
    level: str = "info"


@dataclass
class Settings:
    store: StoreSettings = field(default_factory=StoreSettings)
    fingerprint: FingerprintSettings = field(default_factory=FingerprintSettings)
    detector: DetectorSettings = field(default_factory=DetectorSettings)
    milter: MilterSettings = field(default_factory=MilterSettings)
    smtpd: SmtpdSettings = field(default_factory=SmtpdSettings)
    analysis: AnalysisSettings = field(default_factory=AnalysisSettings)
    policy: PolicySettings = field(default_factory=PolicySettings)
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    log: LogSettings = field(default_factory=LogSettings)
    # Where the settings came from (None: built-in defaults).
    source: str | None = None

    def origin(self, key: str) -> str:
        """Where one setting ("section.key") came from: FILE:LINE, or "default"."""
        return getattr(self, "origins", {}).get(key, "default")

    def validate(self) -> None:
        """Refuse values that cannot be what the user meant: a :class:`ConfigError` naming
        the file, the line and the key, the value, the expected form and an example.

        The daemons' own sections ([milter], [smtpd], [metrics]) are checked by
        :func:`check_milter_settings` and :func:`check_smtpd_settings` instead (a pipe
        filter reading the same file must not stop over them).
        """
        fp, detector, store = self.fingerprint, self.detector, self.store
        checks = [
            (fp.histogram in ("decoded", "raw"), "fingerprint.histogram",
             "must be \"decoded\" or \"raw\""),
            (1 <= fp.ngram <= 32, "fingerprint.ngram", "must be 1..32"),
            (8 <= fp.sketch_size <= 1024, "fingerprint.sketch_size", "must be 8..1024"),
            (1 <= fp.index_size <= fp.sketch_size, "fingerprint.index_size",
             "must be 1..sketch_size"),
            (fp.max_body_bytes >= 1, "fingerprint.max_body_bytes", "must be at least 1"),
            (256 <= fp.chunk_average <= 4194304, "fingerprint.chunk_average",
             "must be 256..4194304 (bytes; FastCDC's range)"),
            (fp.chunk_sample >= 1, "fingerprint.chunk_sample", "must be at least 1"),
            (0.0 < detector.resemblance_threshold <= 1.0,
             "detector.resemblance_threshold", "must be in (0, 1]"),
            (0.0 < detector.same_subject_threshold <= 1.0,
             "detector.same_subject_threshold", "must be in (0, 1]"),
            (0.0 < detector.other_subject_threshold <= 1.0,
             "detector.other_subject_threshold", "must be in (0, 1]"),
            (0.0 < detector.automated_threshold <= 1.0,
             "detector.automated_threshold", "must be in (0, 1]"),
            (0.0 < detector.attachment_threshold <= 1.0,
             "detector.attachment_threshold", "must be in (0, 1]"),
            (0.0 < detector.copy_threshold <= 1.0,
             "detector.copy_threshold", "must be in (0, 1]"),
            (detector.min_words >= 0, "detector.min_words", "must be 0 or more"),
            (detector.histogram_window >= 0, "detector.histogram_window", "must be 0 or more"),
            (0 <= detector.histogram_max_positions <= 36, "detector.histogram_max_positions",
             "must be 0..36 (the histogram has 36 bins)"),
            (detector.histogram_min_chars >= 0, "detector.histogram_min_chars",
             "must be 0 or more"),
            (detector.posting_cap >= 1, "detector.posting_cap", "must be at least 1"),
            (detector.max_candidates >= 1, "detector.max_candidates", "must be at least 1"),
            (detector.histogram_candidates >= 1, "detector.histogram_candidates",
             "must be at least 1"),
            (detector.common_postings >= 1, "detector.common_postings", "must be at least 1"),
            (0.0 <= detector.attachment_share <= 1.0, "detector.attachment_share",
             "must be in [0, 1]"),
            (detector.scope in ("recipient", "global"), "detector.scope",
             "must be \"recipient\" or \"global\""),
            (store.map_size_mb >= 1, "store.map_size_mb", "must be at least 1 (MiB)"),
            (self.analysis.deadline > 0, "analysis.deadline", "must be more than 0 (seconds)"),
            (0 <= self.analysis.workers <= 64, "analysis.workers", "must be 0..64"),
            (self.analysis.offload_bytes >= 0, "analysis.offload_bytes", "must be 0 or more"),
            (store.timeout > 0, "store.timeout", "must be more than 0 (seconds)"),
            (self.milter.on_error in ON_ERROR, "milter.on_error", f"must be one of {ON_ERROR}"),
            (self.smtpd.on_error in ON_ERROR, "smtpd.on_error", f"must be one of {ON_ERROR}"),
            (self.smtpd.mode in ("after-queue", "proxy"), "smtpd.mode",
             "must be \"after-queue\" or \"proxy\""),
            (self.log.target in ("stderr", "syslog"), "log.target",
             "must be \"stderr\" or \"syslog\""),
            (self.log.level.lower() in LOG_LEVELS, "log.level", f"must be one of {LOG_LEVELS}"),
        ]
        for verdict in VERDICTS:
            name = verdict.replace("-", "_")
            checks.append((self.milter.actions.for_verdict(verdict) in MILTER_ACTIONS,
                           f"milter.actions.{name}", f"must be one of {MILTER_ACTIONS}"))
            checks.append((self.smtpd.actions.for_verdict(verdict) in SMTPD_ACTIONS,
                           f"smtpd.actions.{name}", f"must be one of {SMTPD_ACTIONS}"))
        for ok, key, why in checks:
            if not ok:
                raise ConfigError(f"{self._where(key)}: {key} {why}")
        if not all(isinstance(word, str) for word in fp.stoplist):
            raise ConfigError(f"{self._where('fingerprint.stoplist')}: fingerprint.stoplist "
                              "must be a list of words")
        from mailfilter.policy import PolicyError, compile_rules
        try:
            compile_rules(self.policy.rules)
        except PolicyError as error:
            raise ConfigError(f"{self._where('policy.rules')}: {error}") from None
        self._check("store.retention", check_duration, store.retention,
                    example="30d")
        self._check("store.file_mode", check_mode, store.file_mode, example="0600",
                    owner_rw=True)
        self._check("store.path", check_store_path, store.path)
        # Both spellings of the milter socket are one setting: keep libmilter's, so that a
        # reload does not see a change where there is none.  A socket that does not parse
        # is left as it is, for the milter (and `config --check`) to refuse.
        try:
            self.milter.socket = parse_milter_socket(self.milter.socket)
        except Refused:
            pass

    def _check(self, key: str, check: Any, value: Any, **options: Any) -> Any:
        """``check(value, **options)``, its :class:`Refused` turned into a ConfigError
        that names where ``key`` was set: FILE:LINE: key = 'value' why; expected ..."""
        try:
            return check(value, **options)
        except Refused as refused:
            raise ConfigError(f"{self._where(key)}: {key} = {refused}") from None

    def _where(self, key: str) -> str:
        """The command-line flag that set it (see :func:`set_by_flag`), else FILE:LINE of a
        setting the file gave, else the file (or "settings")."""
        origin = getattr(self, "origins", {}).get(key, "")
        if origin.startswith("--"):
            return origin
        if self.source and origin.startswith(f"{self.source}:"):
            return origin
        return self.source or "settings"


_KEY_PART = re.compile(r'\s*(?:"([^"\\]*)"|\'([^\']*)\'|([A-Za-z0-9_-]+))\s*')


def _dotted(text: str, start: int) -> tuple[list[str], int] | None:
    """The dotted key at ``text[start:]`` (bare or quoted parts) and where it ends."""
    parts: list[str] = []
    while True:
        found = _KEY_PART.match(text, start)
        if found is None:
            return None
        parts.append(next(group for group in found.groups() if group is not None))
        start = found.end()
        if not text.startswith(".", start):
            return parts, start
        start += 1


def _key_lines(text: str) -> dict[str, int]:
    """Line of each key the file gives ("section.key"), of each table it opens
    ("[section]", "[milter.actions]") and of every dotted prefix of those, first one
    first: where a misspelt key or section is.  One pass over the lines."""
    lines: dict[str, int] = {}
    table: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        header = re.match(r"\s*\[\[?", line)
        if header is not None:
            found = _dotted(line, header.end())
            if found is None or not line.startswith("]", found[1]):
                continue
            table, path = found[0], found[0]
        else:
            found = _dotted(line, 0)
            if found is None or not line.startswith("=", found[1]):
                continue
            path = table + found[0]
        for end in range(1, len(path) + 1):
            lines.setdefault(".".join(path[:end]), number)
    return lines


def _unknown(prefix: str, raw_key: str, value: object, known: Sequence[str]) -> str:
    """"unknown section [detectr]; did you mean [detector]?", "unknown key
    detector.resemblence_threshold; did you mean detector.resemblance_threshold?", or for a
    key of another section "unknown key store.scope; scope is a key of [detector]"."""
    import difflib
    table = isinstance(value, dict)
    name = f"[{prefix}{raw_key}]" if table else f"{prefix}{raw_key}"
    said = f"unknown {'section' if table else 'key'} {name}"
    close = difflib.get_close_matches(raw_key.replace("-", "_"), known, n=1)
    if close:
        meant = f"{prefix}{close[0]}"
        return f"{said}; did you mean {f'[{meant}]' if table else meant}?"
    if not table:
        homes = [f"[{section.name}]" for section in fields(Settings)
                 if dataclasses.is_dataclass(section.default_factory)
                 and raw_key.replace("-", "_") in {f.name for f in fields(
                     section.default_factory)} and f"{section.name}." != prefix]
        if homes:
            return f"{said}; {raw_key} is a key of {' and '.join(homes)}"
    return said


def _apply(target: Any, table: dict[str, Any], prefix: str, path: str,
           lines: dict[str, int], origins: dict[str, str]) -> None:
    known = {f.name: f for f in fields(target) if f.name != "source"}
    spelled: dict[str, tuple[str, str]] = {}     # key → (spelling, FILE:LINE) seen first
    for raw_key, value in table.items():
        key = raw_key.replace("-", "_")
        where = f"{path}:{lines.get(f'{prefix}{raw_key}', '?')}"
        if key not in known:
            raise ConfigError(f"{where}: {_unknown(prefix, raw_key, value, list(known))}")
        if key in spelled:
            # TOML refuses a key given twice, but near_duplicate and near-duplicate are two
            # keys to it and one setting here: the later one would win without a word.
            first, first_where = spelled[key]
            raise ConfigError(f"{first_where} and {where}: {prefix}{first} and "
                              f"{prefix}{raw_key} are the same setting; keep one of them")
        spelled[key] = (raw_key, where)
        current = getattr(target, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: {prefix}{raw_key} must be a table")
            _apply(current, value, f"{prefix}{raw_key}.", path, lines, origins)
            continue
        expected = type(current)
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if expected is list and isinstance(value, list):
            pass  # element types are checked by Settings.validate()
        elif not isinstance(value, expected) or isinstance(value, bool) != (expected is bool):
            raise ConfigError(f"{where}: {prefix}{raw_key} must be {expected.__name__}, "
                              f"not {type(value).__name__}")
        setattr(target, key, value)
        origins[f"{prefix}{key}"] = where


def _toml_error(message: str, text: str) -> str:
    """tomllib's "Invalid value (at line 7, column 25)" as "7: not valid TOML: Invalid
    value (column 25)", the line first as in every other settings error."""
    found = re.fullmatch(r"(.*) \(at (?:line (\d+), column (\d+)|end of document)\)", message,
                         re.DOTALL)
    if found is None:
        return f" not valid TOML: {message}"
    what, line, column = found.groups()
    if line is None:
        return f"{len(text.splitlines()) or 1}: not valid TOML: {what} (at the end of the file)"
    return f"{line}: not valid TOML: {what} (column {column})"


def find_config(explicit: str | None = None) -> Path | None:
    """The config file in force, by the documented search order (None: defaults)."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("DUPFILTER_CONFIG")
    if env:
        return Path(env)
    user_base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(
        os.path.expanduser("~"), ".config")
    user = Path(user_base) / "dupfilter" / "dupfilter.toml"
    for candidate in (user, SYSTEM_CONFIG):
        if candidate.is_file():
            return candidate
    return None


def load_settings(path: str | os.PathLike[str] | None = None, *,
                  search: bool = True) -> Settings:
    """Read settings from ``path`` (or the search order when ``search``); validate them."""
    chosen = Path(path) if path else (find_config() if search else None)
    settings = Settings()
    if chosen is None:
        settings.validate()
        return settings
    try:
        data = chosen.read_bytes()
    except OSError as error:
        raise ConfigError(f"{chosen}: cannot read configuration: {error.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        raise ConfigError(f"{chosen}:{line}: not UTF-8 (byte 0x{data[error.start]:02x} at "
                          f"column {column}); save the file as UTF-8") from None
    import tomllib  # only with a settings file (the pipe filter often has none)
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{chosen}:{_toml_error(str(error), text)}") from None
    origins: dict[str, str] = {}
    _apply(settings, table, "", str(chosen), _key_lines(text), origins)
    settings.source = str(chosen)
    settings.origins = origins
    settings.validate()
    return settings


# ------------------------------------------------------------------------- value checks
# Each takes a value and returns it (normalised where there are two spellings of one
# thing), or raises Refused: "'VALUE' what is wrong; expected FORMS, e.g. EXAMPLE", which
# the callers prefix with where the value came from and the key.

class Refused(ValueError):
    """A value that cannot be what the user meant: the value, why, the expected form and an
    example, in one line (the caller adds the file, line and key)."""


def _refuse(value: object, why: str, expected: str, example: str) -> NoReturn:
    raise Refused(masked(f"{value!r} {why}; expected {expected}, e.g. {example}"))


def masked(text: str) -> str:
    """``text`` with the password of anything shaped like USER:PASSWORD@ replaced by ***
    (a mistyped Redis URL is echoed in messages that land in logs)."""
    return re.sub(r"([:/])([^:/@\s']*):([^@/\s']*)@", r"\1\2:***@", text)


_LABEL = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)")


def check_host(host: str, value: object, expected: str, example: str) -> str:
    """``host`` → "ipv4", "ipv6" or "name"; refuses (naming ``value``) anything that would
    make the resolver or libmilter guess: an empty host, 127.1 or 010.0.0.1 (inet_aton
    reads them as 127.0.0.1 and 8.0.0.1), an IPv6 scope, a name that is no name."""
    if not host:
        _refuse(value, "names no host (an empty host means every interface)", expected,
                example)
    import ipaddress
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if isinstance(address, ipaddress.IPv6Address):
        if address.scope_id:
            _refuse(value, f"has an IPv6 scope (%{address.scope_id}), which is not "
                    "supported", expected, example)
        return "ipv6"
    if address is not None:
        return "ipv4"
    if re.fullmatch(r"[0-9.]+", host):
        _refuse(value, f"has {host!r}, which is no IPv4 address (four numbers 0-255, no "
                "leading zeros)", expected, example)
    if ":" in host:
        _refuse(value, f"has {host!r}, which is no IPv6 address", expected, example)
    name = host[:-1] if host.endswith(".") else host
    labels = name.split(".")
    if len(name) > 253 or not all(_LABEL.fullmatch(label) for label in labels) \
            or labels[-1].isdigit():
        _refuse(value, f"has {host!r}, which is no host name", expected, example)
    return "name"


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``: what only this machine can reach."""
    import ipaddress
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host.lower().rstrip(".") in ("localhost", "localhost.localdomain")


def _port(text: str, value: object, expected: str, example: str,
          ephemeral: bool = False) -> int:
    """A TCP port 1..65535 (0, a port the system picks, only when ``ephemeral``)."""
    if not text:
        _refuse(value, "names no port", expected, example)
    if not text.isdigit() or not text.isascii():
        _refuse(value, f"has {text!r}, which is no port number", expected, example)
    port = int(text)
    if not (0 if ephemeral else 1) <= port <= 65535:
        _refuse(value, f"has port {port}, outside 1-65535", expected, example)
    return port


HOSTPORT_FORMS = "HOST:PORT or [IPV6]:PORT with a port from 1 to 65535"


def check_hostport(text: str, example: str = "127.0.0.1:10025",
                   ephemeral: bool = False) -> tuple[str, int]:
    """``HOST:PORT`` or ``[IPv6]:PORT`` → (host, port), host without brackets."""
    if not isinstance(text, str):
        _refuse(text, "is not HOST:PORT", HOSTPORT_FORMS, example)
    found = re.fullmatch(r"\[([^\]]*)\]:([^:]*)|([^:\[\]]*):([^:\[\]]*)", text)
    if found is None or any(ch.isspace() for ch in text):
        why = "is not HOST:PORT"
        if text.count(":") > 1 and not text.startswith("["):
            why += " (an IPv6 address needs brackets: [::1]:PORT)"
        _refuse(text, why, HOSTPORT_FORMS, example)
    host = found.group(1) if found.group(1) is not None else found.group(3)
    port = _port(found.group(2) if found.group(1) is not None else found.group(4), text,
                 HOSTPORT_FORMS, example, ephemeral)
    kind = check_host(host, text, HOSTPORT_FORMS, example)
    if kind == "ipv6" and found.group(1) is None:
        _refuse(text, "has an IPv6 address without brackets", HOSTPORT_FORMS, example)
    return host, port


def parse_hostport(text: str, what: str, *, example: str = "127.0.0.1:10025",
                   ephemeral: bool = True) -> tuple[str, int]:
    """``HOST:PORT`` or ``[IPv6]:PORT`` → (host, port); a :class:`ConfigError` starting
    with ``what`` (the key, or FILE:LINE: key) when it is not.  ``ephemeral`` lets port 0
    through (code that asks the system for a free port); a value typed into a file or on
    a command line is checked with it off (see :func:`check_smtpd_settings`)."""
    try:
        return check_hostport(text, example, ephemeral)
    except Refused as refused:
        raise ConfigError(f"{what} = {refused}") from None


MILTER_FORMS = ("inet:PORT@HOST, Postfix's inet:HOST:PORT, inet6:PORT@IPV6, inet:[IPV6]:PORT, "
                "unix:/PATH or local:/PATH")


def parse_milter_socket(text: str) -> str:
    """A milter socket in libmilter's spelling, from either spelling; Refused otherwise.

    libmilter reads ``inet:PORT@HOST`` and ``inet6:PORT@HOST``; Postfix writes
    ``inet:HOST:PORT`` and ``inet:[IPV6]:PORT``.  libmilter given Postfix's spelling reads
    the port as atoi("127.0.0.1:8890") = 127 and, finding no ``@``, listens on every
    interface; given ``inet:99999@...`` it takes the port modulo 65536.  Both spellings
    are accepted here and returned as libmilter's (an IPv6 address as ``inet6:``); a
    socket without a host (libmilter: every interface), a port outside 1-65535, a
    relative unix path or anything else is refused — nothing is guessed.
    """
    example = "inet:8890@127.0.0.1"
    if not isinstance(text, str) or not text:
        _refuse(text, "is empty", MILTER_FORMS, example)
    if any(ch.isspace() or not ch.isprintable() for ch in text):
        _refuse(text, "contains a space or a control character", MILTER_FORMS, example)
    kind, colon, rest = text.partition(":")
    kind = kind.lower()
    if not colon:
        _refuse(text, "has no type", MILTER_FORMS,
                f"unix:{text}" if text.startswith("/") else example)
    if kind in ("unix", "local"):
        example = "unix:/run/dupfilter/milter.sock"
        if not rest.startswith("/"):
            _refuse(text, "is not an absolute path (the daemons run in /, procmail in the "
                    "user's home)", MILTER_FORMS, example)
        if rest.endswith("/"):
            _refuse(text, "names a folder, not a socket", MILTER_FORMS, example)
        if len(rest.encode()) > 107:
            _refuse(text, "is longer than a unix socket path can be (107 bytes)",
                    MILTER_FORMS, example)
        return f"{kind}:{rest}"
    if kind not in ("inet", "inet6"):
        _refuse(text, f"has an unknown type {kind + ':'!r}", MILTER_FORMS, example)
    if "@" in rest:                                     # libmilter: PORT@HOST
        port_text, _, host = rest.partition("@")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]                           # libmilter's numeric [ADDRESS]
    elif rest.startswith("["):                          # Postfix: [IPV6]:PORT
        found = re.fullmatch(r"\[([^\]]*)\]:(.*)", rest)
        if found is None:
            _refuse(text, "is not [IPV6]:PORT", MILTER_FORMS, "inet:[::1]:8890")
        host, port_text = found.groups()
    elif rest.count(":") == 1:                          # Postfix: HOST:PORT
        host, port_text = rest.split(":")
    elif ":" in rest:
        _refuse(text, "has an IPv6 address without brackets, or too many colons",
                MILTER_FORMS, "inet6:8890@::1 or inet:[::1]:8890")
    elif rest.isdigit():
        _refuse(text, "names no host: libmilter would listen on every interface; for "
                f"loopback write {kind}:{rest}@127.0.0.1, for every interface say so "
                f"with {kind}:{rest}@0.0.0.0", MILTER_FORMS, f"{kind}:{rest}@127.0.0.1")
    else:
        _refuse(text, "names no port", MILTER_FORMS, example)
    port = _port(port_text, text, MILTER_FORMS, example)
    family = check_host(host, text, MILTER_FORMS, example)
    if family == "ipv6":
        import ipaddress
        return f"inet6:{port}@{ipaddress.ip_address(host).compressed}"
    if kind == "inet6" and family == "ipv4":
        _refuse(text, "has an IPv4 address after inet6:", MILTER_FORMS,
                f"inet:{port}@{host}")
    return f"{kind}:{port}@{host}"


def check_duration(value: str, example: str = "30d") -> float:
    """A duration with its unit ('30d', '12h', '90m', '45s', '2w'), more than zero."""
    expected = "a number with a unit s, m, h, d or w"
    if not isinstance(value, str) or not re.fullmatch(r"\d+(\.\d+)?[smhdw]", value.strip()):
        why = "has no unit" if isinstance(value, str) and re.fullmatch(
            r"\s*\d+(\.\d+)?\s*", value) else "is not a duration"
        _refuse(value, why, expected, example)
    seconds = parse_duration(value)
    if seconds <= 0:
        _refuse(value, "is no time at all", expected, example)
    return seconds


def check_mode(value: str, example: str = "0600", owner_rw: bool = False) -> int:
    """A file mode as an octal string ('0600', '660'); no set-id or sticky bits."""
    expected = "an octal mode in quotes, as for chmod"
    if not isinstance(value, str) or not re.fullmatch(r"0?[0-7]{3}", value):
        _refuse(value, "is not an octal mode", expected, example)
    mode = int(value, 8)
    if owner_rw and mode & 0o600 != 0o600:
        _refuse(value, "does not let the owner read and write", expected, example)
    return mode


STORE_FORMS = ("an LMDB folder (an absolute path), redis://HOST[:PORT][/DB], "
               "rediss://HOST[:PORT][/DB] or unix:///PATH/TO/SOCKET[?db=N]")
_STORE_SCHEMES = ("redis://", "rediss://", "unix://")


def check_store_location(location: str) -> str:
    """A store location as ``open_store`` reads it: a supported Redis URL, or a folder.

    Anything that looks like a URL but is not one of those is refused (a mistyped
    ``redis:/127.0.0.1:6379`` would otherwise become an LMDB folder of that name, and the
    hosts sharing the Redis store would silently stop sharing).  A folder whose name has
    a colon elsewhere (``/var/lib/dupfilter:old``) is a folder.
    """
    example = "redis://127.0.0.1:6379/0"
    if not isinstance(location, str):
        _refuse(location, "is not a string", STORE_FORMS, example)
    if any(not ch.isprintable() for ch in location):
        _refuse(location, "contains a control character", STORE_FORMS, example)
    lowered = location.lower()
    if lowered.startswith(_STORE_SCHEMES):
        if not location.startswith(_STORE_SCHEMES):
            _refuse(location, "has its scheme in capitals (only lowercase is a URL)",
                    STORE_FORMS, example)
        _check_redis_url(location, example)
        return location
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*):/*(.*)", location, re.DOTALL)
    if scheme is not None and scheme.group(1).lower() in ("redis", "rediss", "unix"):
        # redis:/host, redis:host, unix:/path, unix:path: the slashes went wrong.
        name, rest = scheme.group(1).lower(), scheme.group(2)
        example = f"{name}://{'/' if name == 'unix' else ''}{rest or 'HOST'}"
    if "://" in location or scheme is not None:
        what = f"{scheme.group(1)}:" if scheme else location.split("://")[0] + "://"
        _refuse(location, f"looks like a URL ({what}) but is none dupfilter reads (for "
                "a folder whose name has a colon, write ./NAME or its absolute path)",
                STORE_FORMS, example)
    missing = re.match(r"(?i)(redis|rediss|unix)/+(.*)", location, re.DOTALL)
    if missing is not None and location[len(missing.group(1)):].startswith("//"):
        name = missing.group(1).lower()
        _refuse(location, "looks like a URL with its colon missing", STORE_FORMS,
                f"{name}://{'/' if name == 'unix' else ''}{missing.group(2) or 'HOST'}")
    return location


def check_store(location: str) -> None:
    """:func:`check_store_location` for ``open_store`` (``--db`` and every other way a
    location reaches it): a :class:`ConfigError` "store location '...' ...; expected ..."."""
    try:
        check_store_location(location)
    except Refused as refused:
        raise ConfigError(f"store location {refused}") from None


def _check_redis_url(url: str, example: str) -> None:
    from urllib.parse import parse_qsl, urlsplit
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        _refuse(url, f"is not a valid URL ({error})", STORE_FORMS, example)
    try:
        query = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        _refuse(url, "has a query that is not NAME=VALUE&...", STORE_FORMS, example)
    for name, value in query:
        if name == "db" and not value.isdigit():
            _refuse(url, f"has db={value!r}, which is no database number", STORE_FORMS,
                    example)
        if name == "partitions" and not (value.isdigit() and 1 <= int(value) <= 1024):
            _refuse(url, f"has partitions={value!r}, not a number from 1 to 1024",
                    STORE_FORMS, example)
    if parts.scheme == "unix":
        example = "unix:///run/redis/redis.sock?db=0"
        if parts.hostname or parts.port is not None:
            _refuse(url, f"names a host ({parts.hostname or parts.netloc!r}) where the "
                    "socket's absolute path should start: write three slashes",
                    STORE_FORMS, example)
        if not parts.path.startswith("/") or parts.path.endswith("/"):
            _refuse(url, "names no socket path", STORE_FORMS, example)
        return
    if not parts.hostname:
        _refuse(url, "names no host", STORE_FORMS, example)
    check_host(parts.hostname, url, STORE_FORMS, example)
    if port is not None and not 1 <= port <= 65535 or (
            port is None and parts.netloc.endswith(":")):
        _refuse(url, "has no port from 1 to 65535 after its colon", STORE_FORMS, example)
    if not re.fullmatch(r"(/\d*)?", parts.path):
        _refuse(url, f"has {parts.path!r} where the database number goes", STORE_FORMS,
                example)


def check_store_path(path: str) -> str:
    """``[store] path`` of a file: empty (the per-user default), a Redis URL, or an absolute
    folder (a relative one would be relative to each reader's working directory: / for
    the daemons, the user's home under procmail; ``~`` is not expanded)."""
    if path == "":
        return path
    check_store_location(path)
    if path.startswith(_STORE_SCHEMES) or path.startswith("/"):
        return path
    example = f"/var/lib/dupfilter or {os.path.join('/home/USER', path.lstrip('~/'))}"
    why = ("starts with ~, which is not expanded here" if path.startswith("~")
           else "is a relative path (relative to wherever each program runs)")
    _refuse(path, why, STORE_FORMS, example)


# ------------------------------------------------------------------- command-line flags
# A flag overrides the file: its value is checked as the file's would be, and refused
# naming the flag ("--db: store.path = 'redis:/x' looks like a URL ..."), not the file.

def set_by_flag(settings: Settings, key: str, flag: str, value: Any,
                check: Any = None, **options: Any) -> Any:
    """Set ``key`` ("section.name") from ``flag``: recorded in ``settings.origins`` as the
    flag (so every later check names the flag, and the value counts as typed: see
    :func:`_typed`), checked with ``check`` (a value check of this module) when given."""
    origins = getattr(settings, "origins", None)
    if origins is None:
        origins = settings.origins = {}
    origins[key] = flag
    if check is not None:
        value = settings._check(key, check, value, **options)
    section, name = key.split(".")
    setattr(getattr(settings, section), name, value)
    return value


def check_store_flag(location: str) -> str:
    """``--db``: a store location (:func:`check_store_location`), not empty (an unset
    variable in a unit file or a wrapper); a folder made absolute, as the daemon resolves
    it where it was started."""
    if not isinstance(location, str) or not location.strip():
        _refuse(location, "names no store", STORE_FORMS, "/var/lib/dupfilter")
    check_store_location(location)
    if location.startswith(_STORE_SCHEMES):
        return location
    return os.path.abspath(location)


def check_user(name: str) -> str:
    """``--user``: an account that exists on this machine."""
    import pwd
    expected = "an existing user account to run as"
    if not isinstance(name, str) or not name or not name.isprintable():
        _refuse(name, "names no user", expected, "dupfilter")
    try:
        pwd.getpwnam(name)
    except KeyError:
        _refuse(name, "is no user on this machine (see getent passwd)", expected,
                "dupfilter")
    return name


def check_seconds(value: float, example: str = "10") -> float:
    """A time in seconds, more than zero and finite (``--store-retry``)."""
    import math
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value <= 0:
        _refuse(value, "is not a time in seconds more than 0", "a number of seconds",
                example)
    return float(value)


def check_flag(flag: str, check: Any, value: Any, **options: Any) -> Any:
    """``check(value)`` for a flag that sets no setting: :class:`Refused` becomes a
    :class:`ConfigError` "FLAG 'VALUE' why; expected ..."."""
    try:
        return check(value, **options)
    except Refused as refused:
        raise ConfigError(f"{flag} {refused}") from None


# ------------------------------------------------------------------- front-end settings
# Checked by the daemon that uses them (after its command-line flags) and by
# `dupfilter-db config --check`, not by every load: a pipe filter reading the same file
# must not stop working over a daemon's section.

def _typed(settings: Settings, key: str) -> bool:
    """True when ``key`` was set by a person (a file, or a flag the front end recorded in
    ``settings.origins``), False for a default or a value set by code (tests)."""
    return settings.origin(key) != "default"


def check_milter_settings(settings: Settings) -> None:
    """What dupfilter-milter refuses to start with (ConfigError naming the key).

    ``milter.socket`` is rewritten in place to libmilter's spelling (see
    :func:`parse_milter_socket`): the milter hands it to libmilter right after this."""
    milter = settings.milter
    milter.socket = settings._check("milter.socket", parse_milter_socket, milter.socket)
    settings._check("milter.socket_mode", check_mode, milter.socket_mode, example="0660")
    if not isinstance(milter.timeout, int) or milter.timeout < 0:
        raise ConfigError(f"{settings._where('milter.timeout')}: milter.timeout = "
                          f"{milter.timeout!r} must be 0 (no limit) or more seconds, e.g. 600")
    if milter.max_body_bytes < 1:
        raise ConfigError(f"{settings._where('milter.max_body_bytes')}: "
                          "milter.max_body_bytes must be at least 1")
    check_metrics_settings(settings)


def check_socket_group(settings: Settings) -> None:
    """``milter.socket_group`` names a group that exists (for a unix socket; an empty group
    leaves the socket's group alone).  Not part of :func:`check_milter_settings`: the
    milter itself logs a missing group and goes on with the mode alone (docs/postfix.md)."""
    import grp
    milter = settings.milter
    if not milter.socket.lower().startswith(("unix:", "local:")) or not milter.socket_group:
        return
    try:
        grp.getgrnam(milter.socket_group)
    except KeyError:
        raise ConfigError(
            f"{settings._where('milter.socket_group')}: milter.socket_group = "
            f"{milter.socket_group!r} is no group on this machine; expected the group of "
            "the MTA's smtpd (e.g. postfix), or \"\" to keep the socket's group") from None


def check_metrics_settings(settings: Settings) -> None:
    """``metrics.listen``: HOST:PORT with a host named (loopback unless it says otherwise)."""
    key = "metrics.listen"
    parse_hostport(settings.metrics.listen, f"{settings._where(key)}: {key}",
                   example="127.0.0.1:9464", ephemeral=not _typed(settings, key))


def check_smtpd_settings(settings: Settings) -> None:
    """What dupfilter-smtpd refuses to start with: listen and next_hop not HOST:PORT, or
    ``reject`` in after-queue mode (there a refusal would become a bounce)."""
    smtpd = settings.smtpd
    for key, example in (("listen", "127.0.0.1:10025"), ("next_hop", "127.0.0.1:10026")):
        name = f"smtpd.{key}"
        parse_hostport(getattr(smtpd, key), f"{settings._where(name)}: {name}",
                       example=example, ephemeral=not _typed(settings, name))
    for key, ok, why in (
            ("max_message_bytes", smtpd.max_message_bytes >= 0, "0 (no limit) or more"),
            ("timeout", smtpd.timeout > 0, "more than 0 seconds")):
        if not ok:
            raise ConfigError(f"{settings._where(f'smtpd.{key}')}: smtpd.{key} must be "
                              f"{why}")
    check_metrics_settings(settings)
    if smtpd.mode == "proxy":
        return
    for verdict in VERDICTS:
        if smtpd.actions.for_verdict(verdict) == Action.REJECT:
            name = verdict.replace("-", "_")
            raise ConfigError(
                f"{settings._where(f'smtpd.actions.{name}')}: smtpd.actions.{name} = "
                "\"reject\" needs smtpd.mode = \"proxy\": after the queue a refusal would "
                "become a bounce; use \"tag\" or \"discard\"")
