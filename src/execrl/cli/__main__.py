"""``python -m execrl.cli ...``: the ``execrl`` command."""

import sys

from execrl.cli import main

sys.exit(main())
