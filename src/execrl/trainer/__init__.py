"""execrl.trainer."""
