"""execrl.telemetry."""
