"""MAST-like workloads: tenants, arrivals, the seeded generator, and CSV traces."""
