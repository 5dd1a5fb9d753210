"""execrl.recipes."""
