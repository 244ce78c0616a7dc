"""Placement: the fit arithmetic, engine gates, the integer program, checks, reports and the CLI."""
