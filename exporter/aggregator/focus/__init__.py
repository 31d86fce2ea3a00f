"""The FinOps FOCUS export: rows read from the ledger, the rate card, and the CSV, JSON Lines and Parquet
writers, plus the ``export`` command. It reads ``ledger`` (and the pricing source from ``books``); the HTTP
route that serves it lives in ``web``, above it, so the export never imports the daemon's routes."""
