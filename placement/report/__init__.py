"""The weekly report and the ledger view: figures, Markdown/HTML, charts, demo data."""
