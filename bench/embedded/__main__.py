"""``python -m bench.embedded``: see :mod:`bench.embedded`."""

from bench.embedded.main import main

main()
