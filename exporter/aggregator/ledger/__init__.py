"""The ledger: schema and migrations, the SQLite and PostgreSQL backends, the rows a tick writes and the reads
every report starts from (``report.Query``). It owns the database and imports only ``exporter.model`` (and
logging): nothing of books, kube, advice, fleet, focus or web, so a change here cannot depend on how a tick is
booked or shown."""
