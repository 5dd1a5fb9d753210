"""execrl.rollout."""
