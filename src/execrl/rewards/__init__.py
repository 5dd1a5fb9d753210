"""execrl.rewards."""
