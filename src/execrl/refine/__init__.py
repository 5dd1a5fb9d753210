"""execrl.refine."""
