"""``dupfilter-smtpd``, the SMTP content filter on aiosmtpd: :mod:`.server` (command line,
listening socket, signals), :mod:`.handler` (the work of each message), :mod:`.protocol`
(the aiosmtpd subclass), :mod:`.nexthop` (the SMTP client and its pool) and :mod:`.wire`
(replies, CRLF and dot-stuffing).  ``python -m mailfilter.smtpd`` runs it."""
