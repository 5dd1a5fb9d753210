"""execrl.bench."""
