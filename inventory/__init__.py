"""Inventory: NVML readings, snapshots, process attribution and the SQLite ledger."""
