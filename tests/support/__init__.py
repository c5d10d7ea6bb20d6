"""What the tests and the benchmarks share: the corpus, free ports, an SMTP sink, a private
Postfix, the daemons as processes (or the SMTP filter in a thread), the command line.

The tests import it as ``support`` (conftest.py puts tests/ on ``sys.path``); a benchmark
puts the repository's root on ``sys.path`` and imports ``tests.support``.  Its modules
import each other relatively, so both work.

* :mod:`.corpus`: where the shared SpamAssassin corpus is, and unpacking it;
* :mod:`.ports`: free TCP ports, waiting for a listener;
* :mod:`.smtp_sink`: an SMTP server that keeps what it gets, with scriptable failures;
* :mod:`.postfix`: a private Postfix on loopback, and the master.cf of the filter loop;
* :mod:`.daemons`: dupfilter-milter and dupfilter-smtpd as processes, the SMTP filter's
  server in a thread of the test, their log lines;
* :mod:`.milter_client`: the MTA side of the milter protocol (miltertest);
* :mod:`.cli`: ``dupfilter`` and ``dupfilter-db`` as a user runs them.
"""
