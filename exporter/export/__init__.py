"""Exports of the ledger in formats other tools read (FOCUS for FinOps tools)."""
