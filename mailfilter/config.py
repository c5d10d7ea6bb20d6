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
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

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
    # A shingle from a message's last lines that this many stored messages share is list
    # boilerplate (a footer): it is left out of resemblance and candidate lookup.
    common_postings: int = 8


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

    # pymilter syntax: inet:PORT@HOST or unix:/path.
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
    policy: PolicySettings = field(default_factory=PolicySettings)
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    log: LogSettings = field(default_factory=LogSettings)
    # Where the settings came from (None: built-in defaults).
    source: str | None = None

    def origin(self, key: str) -> str:
        """Where one setting ("section.key") came from: FILE:LINE, or "default"."""
        return getattr(self, "origins", {}).get(key, "default")

    def validate(self) -> None:
        checks = [
            (self.fingerprint.histogram in ("decoded", "raw"), "fingerprint.histogram",
             "must be \"decoded\" or \"raw\""),
            (1 <= self.fingerprint.ngram <= 32, "fingerprint.ngram", "must be 1..32"),
            (8 <= self.fingerprint.sketch_size <= 1024, "fingerprint.sketch_size",
             "must be 8..1024"),
            (1 <= self.fingerprint.index_size <= self.fingerprint.sketch_size,
             "fingerprint.index_size", "must be 1..sketch_size"),
            (0.0 < self.detector.resemblance_threshold <= 1.0,
             "detector.resemblance_threshold", "must be in (0, 1]"),
            (self.detector.max_candidates >= 1, "detector.max_candidates", "must be at least 1"),
            (self.detector.histogram_candidates >= 1, "detector.histogram_candidates",
             "must be at least 1"),
            (self.detector.scope in ("recipient", "global"), "detector.scope",
             "must be \"recipient\" or \"global\""),
            (self.milter.on_error in ON_ERROR, "milter.on_error", f"must be one of {ON_ERROR}"),
            (self.smtpd.on_error in ON_ERROR, "smtpd.on_error", f"must be one of {ON_ERROR}"),
            (self.smtpd.mode in ("after-queue", "proxy"), "smtpd.mode",
             "must be \"after-queue\" or \"proxy\""),
            (self.log.target in ("stderr", "syslog"), "log.target",
             "must be \"stderr\" or \"syslog\""),
            (self.log.level.lower() in LOG_LEVELS, "log.level", f"must be one of {LOG_LEVELS}"),
            (re.fullmatch(r"\[?[\w.:-]*\]?:\d{1,5}", self.metrics.listen) is not None,
             "metrics.listen", "must be HOST:PORT"),
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
        if not all(isinstance(word, str) for word in self.fingerprint.stoplist):
            raise ConfigError(f"{self._where('fingerprint.stoplist')}: fingerprint.stoplist "
                              "must be a list of words")
        from mailfilter.policy import PolicyError, compile_rules
        try:
            compile_rules(self.policy.rules)
        except PolicyError as error:
            raise ConfigError(f"{self._where('policy.rules')}: {error}") from None
        for key, value in (("store.retention", self.store.retention),):
            try:
                parse_duration(value)
            except ValueError as error:
                raise ConfigError(f"{self._where(key)}: {key}: {error}") from None

    def _where(self, key: str) -> str:
        """FILE:LINE of a setting the file gave, else the file (or "settings")."""
        origin = getattr(self, "origins", {}).get(key, "")
        if self.source and origin.startswith(f"{self.source}:"):
            return origin
        return self.source or "settings"


def _line_of(text: str, section: str, key: str) -> int | None:
    """Line number of ``key`` inside ``[section]`` (the top level when empty)."""
    start = 0
    if section:
        header = re.search(rf"^\s*\[\s*{re.escape(section)}\s*\]", text, re.MULTILINE)
        if header is None:
            return None
        start = header.end()
    following = re.compile(r"^\s*\[", re.MULTILINE).search(text, start)
    end = following.start() if following else len(text)
    found = re.compile(rf"^\s*\"?{re.escape(key)}\"?\s*=", re.MULTILINE).search(
        text, start, end)
    return text.count("\n", 0, found.start()) + 1 if found else None


def _apply(target: Any, table: dict[str, Any], prefix: str, path: str, text: str,
           origins: dict[str, str]) -> None:
    known = {f.name: f for f in fields(target) if f.name != "source"}
    for raw_key, value in table.items():
        key = raw_key.replace("-", "_")
        where = f"{path}:{_line_of(text, prefix.rstrip('.'), raw_key) or '?'}"
        if key not in known:
            raise ConfigError(f"{where}: unknown key {prefix}{raw_key}")
        current = getattr(target, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: {prefix}{raw_key} must be a table")
            _apply(current, value, f"{prefix}{raw_key}.", path, text, origins)
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
        text = chosen.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{chosen}: cannot read configuration: {error.strerror}") from None
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{chosen}: {error}") from None
    origins: dict[str, str] = {}
    _apply(settings, table, "", str(chosen), text, origins)
    settings.source = str(chosen)
    settings.origins = origins
    settings.validate()
    return settings


# ------------------------------------------------------------------- front-end settings
# Checked by the daemon that uses them (after its command-line flags) and by
# `dupfilter-db config --check`, not by every load: a pipe filter reading the same file
# must not stop working over a daemon's section.

def parse_hostport(text: str, what: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[IPv6]:PORT`` → (host, port); ConfigError when malformed."""
    match = re.fullmatch(r"\[([^\]]+)\]:(\d+)|([^\s:\[\]]+):(\d+)", text.strip())
    if not match:
        raise ConfigError(f"{what}: {text!r} is not HOST:PORT")
    host = match.group(1) or match.group(3)
    port = int(match.group(2) or match.group(4))
    if not 0 <= port <= 65535:
        raise ConfigError(f"{what}: port {port} out of range")
    return host, port


def check_milter_settings(settings: Settings) -> None:
    """What dupfilter-milter refuses to start with (ConfigError naming the key)."""
    spec = settings.milter.socket
    if not spec.startswith(("unix:", "local:", "inet:", "inet6:")):
        raise ConfigError(f"{settings._where('milter.socket')}: milter.socket {spec!r}: "
                          "expected inet:PORT@HOST or unix:/path")


def check_smtpd_settings(settings: Settings) -> None:
    """What dupfilter-smtpd refuses to start with: listen and next_hop not HOST:PORT, or
    ``reject`` in after-queue mode (there a refusal would become a bounce)."""
    smtpd = settings.smtpd
    for key in ("listen", "next_hop"):
        parse_hostport(getattr(smtpd, key), f"{settings._where(f'smtpd.{key}')}: smtpd.{key}")
    if smtpd.mode == "proxy":
        return
    for verdict in VERDICTS:
        if smtpd.actions.for_verdict(verdict) == Action.REJECT:
            name = verdict.replace("-", "_")
            raise ConfigError(
                f"{settings._where(f'smtpd.actions.{name}')}: smtpd.actions.{name} = "
                "\"reject\" needs smtpd.mode = \"proxy\": after the queue a refusal would "
                "become a bounce; use \"tag\" or \"discard\"")
