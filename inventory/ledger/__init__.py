"""The SQLite ledger: schema, migrations, writes, and every query the report and demo need.

No SQL outside this package."""
