"""The emulated network and hardware: topology, latency and link faults, WAN bulk flows."""
