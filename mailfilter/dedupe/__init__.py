"""``dupfilter-db dedupe``: find the duplicates a mailbox already holds and act on them.

:mod:`.sources` reads and changes Maildir, mbox and IMAP folders; :mod:`.plan` judges
which messages are copies of which (through :class:`~mailfilter.engine.Engine`) and which
copy each group keeps; :mod:`.act` reports, moves, flags or deletes the others, writing an
undo log first, and replays such a log backwards.
"""
