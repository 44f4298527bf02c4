"""`python -m rlbridge` is the `rlbridge` command."""

import sys

from rlbridge.experiment.lifeline import watch_parent

watch_parent()  # a child of an RLBridgeEnv.spawn and the like stops when its parent is gone

from rlbridge.cli import main  # noqa: E402

sys.exit(main())
