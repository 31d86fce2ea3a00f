"""Pure domain model: devices, shares, counters, prices and the accounting arithmetic.

Nothing in this package performs I/O or imports aiohttp, grpc, kubernetes or sqlite, so the
golden accounting tests can exercise it directly.
"""
