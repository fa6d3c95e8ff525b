"""``python -m eval_harness`` entry point (see `eval_harness.cli`)."""

import sys

from .cli import main

sys.exit(main())
