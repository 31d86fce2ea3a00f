"""The pricing file's semantics (PRICING.md): the document and its schema, node labels to capacity types, the
per-node rate resolution and commitments. Pure: no I/O imports."""
