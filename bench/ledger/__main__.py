"""``python -m bench.ledger``: see :mod:`bench.ledger`."""

from bench.ledger.main import main

main()
