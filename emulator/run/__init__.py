"""Running scenarios: parse, run, resume, replay, sweep over seeds, shrink, benchmark."""
