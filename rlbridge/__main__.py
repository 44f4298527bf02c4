"""`python -m rlbridge` is the `rlbridge` command."""

import sys

from rlbridge.cli import main

sys.exit(main())
