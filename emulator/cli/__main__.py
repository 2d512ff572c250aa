"""`python -m emulator.cli`: the `mastemu` command."""

import sys

from emulator.cli.main import main

sys.exit(main())
