"""Moved to `numadapter.app.cli` (the command line is application code, apart from the library).

This module keeps the old paths working: ``numadapter.cli`` imports as the module ``numadapter.app.cli`` itself, and
``python -m numadapter.cli ...`` (also under ``accelerate launch`` / ``torchrun``) and console scripts installed by an
older numadapter (``numadapter.cli:main``) run the same `main`.
"""

import sys

from numadapter.app import cli as moved

if __name__ == "__main__":
    sys.exit(moved.main())
sys.modules[__name__] = moved
