"""Shockwave: rounds planned ahead for fairness and efficiency, with its predictor and solvers."""
