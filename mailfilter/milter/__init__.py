"""``dupfilter-milter``, the Postfix/Sendmail milter on pymilter: :mod:`.session` (one MTA
connection: collect, check, translate the disposition into milter calls) and :mod:`.server`
(the command line, the socket, signals).  ``python -m mailfilter.milter`` runs it."""
