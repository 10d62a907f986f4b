"""``python -m bench.load`` (``./dev bench``): see :mod:`bench.load`."""

from bench.load.main import main

main()
