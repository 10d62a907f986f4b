"""``python -m bench.web``: see :mod:`bench.web`."""

import sys

from bench.web.main import main

sys.exit(main())
