"""The command-line programs: :mod:`.pipe` (``dupfilter``, the pipe filter),
:mod:`.admin` (``dupfilter-db``), :mod:`.examine` (its commands that look at messages
rather than the store) and :mod:`.batch` (checking many messages, fingerprinted by a pool of
processes).  No detection logic lives here: commands turn files and flags into calls on
:class:`~mailfilter.engine.Engine` and print what comes back.
"""

from __future__ import annotations

import argparse

from mailfilter.config import Settings, load_settings


def settings_from(args: argparse.Namespace) -> Settings:
    """The settings of ``--config`` (or the search order), with ``--db`` applied."""
    settings = load_settings(args.config)
    if getattr(args, "db", None):
        settings.store.path = args.db
    return settings
