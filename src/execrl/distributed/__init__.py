"""execrl.distributed."""
