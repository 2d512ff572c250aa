"""The `leader-lease` demonstration: two candidates contend for one role's lease."""
