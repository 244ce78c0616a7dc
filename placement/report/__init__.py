"""The weekly report and the ledger view: rows, figures from the ledger, advice, Markdown/HTML, charts, demo data."""
