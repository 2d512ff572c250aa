"""Smallest gang first: a cluster policy, the invariant it promises, and a scenario."""
