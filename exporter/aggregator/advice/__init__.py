"""Advice read from the books: right-sizing recommendations, month-end budget forecasts and what-if repricing.
It reads the ledger (``ledger.report.Query``) and imports nothing of books, fleet, focus or web: advice never
changes what is booked."""
