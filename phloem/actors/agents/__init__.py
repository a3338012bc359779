"""The `agents` service: list, plan, run and cancel the catalogue's agents."""
