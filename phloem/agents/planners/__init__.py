"""The planners of a `PlannerAgent`: sequential, parallel, loop, goal-oriented (GOAP), peer-to-peer
and the model-driven supervisor, on the one contract of `base`."""
