"""Seat catalogue: byte units, the pydantic model of hosts, reserves and seats, YAML loading."""
