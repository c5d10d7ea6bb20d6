"""What dupfilter-smtpd's sessions share with the server that runs them.

The server owns one :class:`Lifecycle`; the handler and each SMTP session get it, not the
server, so neither reaches into the server (nor imports it): whether it is draining, the
open sessions, the messages in flight, and the log their outcomes go to.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mailfilter.logs import OutcomeLog


class Lifecycle:
    """The sessions' view of the server: draining or not, who is connected, what is in
    flight, where each message's line goes."""

    def __init__(self, outcomes: OutcomeLog) -> None:
        self.outcomes = outcomes
        self.draining = False           # set by the server's stop(): no new transaction
        self.sessions: set[Any] = set()     # open SMTP sessions (FilterSMTP)
        self.tasks: set[asyncio.Future[Any]] = set()    # messages being processed

    def track(self, task: asyncio.Future[Any]) -> None:
        """Count ``task`` as in flight until it is done (the server's stop waits for it)."""
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
