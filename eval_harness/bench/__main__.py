"""``python -m eval_harness.bench``: every speed benchmark, then ``bench.json`` and ``bench.md`` (see `all`)."""

import sys

from .all import main

sys.exit(1 if main()["failed"] else 0)
