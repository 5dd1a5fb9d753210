"""``python -m execrl`` (``torchrun -m execrl train ...`` starts each rank this way)."""

from execrl.cli import main

raise SystemExit(main())
