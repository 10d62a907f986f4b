"""Start the ``pipeledger`` command once released, after its imports.

    python tests/drills/launch.py READY GO

Imports the command's entry point, creates the file READY, waits until the file GO exists,
then runs the entry point with the arguments GO holds (a JSON list). Importing takes
~1.5 s on a small machine: released this way, a kill delay measures the run's own work,
many processes reach the database within milliseconds of each other, and the drill can
import the next command while it checks the last one. Run by its path, this folder comes
first on ``sys.path``: no module here may be named like one of the standard library's
(``concurrent``, ``types``, ...).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main() -> None:
    ready, go = Path(sys.argv[1]), Path(sys.argv[2])
    from pipeledger.cli.app import main as pipeledger

    ready.touch()
    while not go.exists():
        time.sleep(0.002)
    sys.argv = ["pipeledger", *json.loads(go.read_text())]
    pipeledger()


if __name__ == "__main__":
    main()
