"""``python -m mailfilter.smtpd``: the same as the ``dupfilter-smtpd`` command."""

import sys

from mailfilter.smtpd.server import main

sys.exit(main())
