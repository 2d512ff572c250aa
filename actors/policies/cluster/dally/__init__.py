"""Dally: network-sensitive priority, delay scheduling and its auto-tuned timers."""
