"""Advice read from the books: right-sizing recommendations, month-end budget forecasts, budgets over windows (and
the holds of budgets that act, through ``kube.queue_hold``) and what-if repricing. It reads the ledger
(``ledger.report.Query``; the one thing it writes is ``budget_holds``) and imports nothing of books, fleet, focus or
web: advice never changes what is booked."""
