"""Typed errors raised at the wire boundary, so callers never see aiohttp/grpc internals."""

from __future__ import annotations


class PeerError(Exception):
    """A peer (DCGM Exporter, kubelet, API server, agent) failed or answered badly."""


class PeerUnavailable(PeerError):
    """The peer could not be reached (refused, socket missing, timeout)."""


class PeerRateLimited(PeerError):
    """The peer asked us to slow down (gRPC RESOURCE_EXHAUSTED, HTTP 429)."""


class PeerResponseTooLarge(PeerError):
    """The peer's answer exceeded our size limit."""


class PeerBadResponse(PeerError):
    """The peer answered with something we cannot use."""
