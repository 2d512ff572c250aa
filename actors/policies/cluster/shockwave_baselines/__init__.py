"""Shockwave §8.2's other baselines (besides Gavel and Themis): OSSP, MST, AlloX, Gandiva-Fair."""
