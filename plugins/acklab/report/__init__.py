"""Run history, regression detection and the static HTML report."""
