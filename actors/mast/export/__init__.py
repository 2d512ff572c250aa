"""MAST runs exported for trace viewers: `chrome` groups a run's trace by region and cluster
(`mastemu export --format chrome`; registered in `actors.plugin`)."""
