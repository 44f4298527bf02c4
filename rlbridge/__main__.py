"""`python -m rlbridge` is the `rlbridge` command."""

import sys

from .cli import main

sys.exit(main())
