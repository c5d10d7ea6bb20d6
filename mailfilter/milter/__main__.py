"""``python -m mailfilter.milter``: the same as the ``dupfilter-milter`` command."""

import sys

from mailfilter.milter.server import main

sys.exit(main())
