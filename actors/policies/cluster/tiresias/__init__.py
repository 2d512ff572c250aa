"""Tiresias: two-dimensional attained-service queues, their parameters and placement."""
