"""The `cluster` service: owns the Ray backend (`phloem.cluster`) while it is on."""
