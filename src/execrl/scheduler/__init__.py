"""execrl.scheduler."""
