"""Prometheus: the exporter, the metric names, and the reader that turns answers into snapshots."""
