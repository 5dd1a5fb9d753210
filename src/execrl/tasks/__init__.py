"""execrl.tasks."""
