"""TLS contexts from mounted certificate files, for both daemons' servers and the aggregator's client."""

from __future__ import annotations

import ssl
from pathlib import Path


def server_context(cert_file: Path | None, key_file: Path | None) -> ssl.SSLContext | None:
    """The servers' TLS context (TLS 1.2+) from a certificate and key; None when neither is set,
    ValueError when only one is."""
    if cert_file is None and key_file is None:
        return None
    if cert_file is None or key_file is None:
        raise ValueError("tls_cert_file and tls_key_file must be set together")
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert_file), str(key_file))
    return ctx


def client_context(ca_file: Path | None) -> ssl.SSLContext | None:
    """The client's context trusting ``ca_file`` (TLS 1.2+); None when no CA file is set (the default trust store)."""
    if ca_file is None:
        return None
    ctx = ssl.create_default_context(cafile=str(ca_file))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx
