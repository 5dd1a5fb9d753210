"""execrl.eval."""
