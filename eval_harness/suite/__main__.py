"""``python -m eval_harness.suite`` entry point (see `eval_harness.suite.run`)."""

from eval_harness.suite.run import main

main()
