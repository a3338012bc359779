"""What every layer above the formats uses: settings, logs, telemetry hooks, paths."""
