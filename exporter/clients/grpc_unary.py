"""One unary gRPC call over HTTP/2 on a unix socket, with the ``h2`` protocol library.

The agent makes one or two calls per tick to one local peer (the kubelet). The gRPC C core costs each
agent about 12 MB of memory (8.6 MB of imports, 4 MB more once a channel exists); HTTP/2 framing in
pure Python costs about 1.3 MB. A call opens its own connection: a unix-socket connect is cheap at this
rate and leaves no channel state to repair when the kubelet restarts and recreates its socket.
Wire format: gRPC over HTTP/2 (length-prefixed messages, status in the trailers or a trailers-only
response); compressed responses are refused (we never ask for compression).
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    ResponseReceived,
    StreamEnded,
    StreamReset,
    TrailersReceived,
)
from h2.exceptions import StreamClosedError
from h2.settings import SettingCodes

#: gRPC status codes this client tells apart (google.rpc.Code).
OK, DEADLINE_EXCEEDED, UNIMPLEMENTED, RESOURCE_EXHAUSTED, UNAVAILABLE, INTERNAL = 0, 4, 12, 8, 14, 13
CODE_NAMES = {0: "OK", 1: "CANCELLED", 2: "UNKNOWN", 3: "INVALID_ARGUMENT", 4: "DEADLINE_EXCEEDED", 5: "NOT_FOUND",
              6: "ALREADY_EXISTS", 7: "PERMISSION_DENIED", 8: "RESOURCE_EXHAUSTED", 9: "FAILED_PRECONDITION",
              10: "ABORTED", 11: "OUT_OF_RANGE", 12: "UNIMPLEMENTED", 13: "INTERNAL", 14: "UNAVAILABLE",
              15: "DATA_LOSS", 16: "UNAUTHENTICATED"}
_WINDOW = 16 << 20  # receive window: a large List arrives in a few round trips, not a thousand


class GrpcError(Exception):
    """A call that did not return a message: its gRPC status code and message."""

    def __init__(self, code: int, details: str) -> None:
        super().__init__(f"{CODE_NAMES.get(code, str(code))}: {details}")
        self.code = code
        self.details = details

    @property
    def name(self) -> str:
        """The status code's name (``RESOURCE_EXHAUSTED``), or the number when unknown."""
        return CODE_NAMES.get(self.code, str(self.code))


@dataclass(slots=True)
class _Response:
    status: int | None = None  # HTTP status
    grpc_status: int | None = None
    grpc_message: str = ""
    body: bytearray | None = None
    ended: bool = False


def _headers(response: _Response, headers: list[tuple[bytes, bytes]]) -> None:
    for name, value in headers:
        if name == b":status":
            response.status = int(value)
        elif name == b"grpc-status":
            response.grpc_status = int(value) if value.isdigit() else INTERNAL
        elif name == b"grpc-message":
            response.grpc_message = unquote(value.decode("utf-8", "replace"))


async def unary_call(socket_path: Path, method: str, *, request: bytes, timeout: float,
                     max_receive_bytes: int) -> bytes:
    """Send ``request`` (a serialized message) to ``method`` (``/package.Service/Method``); the reply's bytes.

    Raises :class:`GrpcError`: UNAVAILABLE when the socket cannot be reached or the connection breaks,
    DEADLINE_EXCEEDED after ``timeout`` seconds, RESOURCE_EXHAUSTED past ``max_receive_bytes``, else the
    peer's status."""
    try:
        async with asyncio.timeout(timeout):  # not ``wait_for``: on 3.11 it can swallow a cancel that meets the end
            return await _call(socket_path, method, request=request, max_receive_bytes=max_receive_bytes)
    except TimeoutError:
        raise GrpcError(DEADLINE_EXCEEDED, f"no answer within {timeout:g}s") from None
    except OSError as exc:
        raise GrpcError(UNAVAILABLE, f"{socket_path}: {exc.strerror or exc}") from None


async def _call(socket_path: Path, method: str, *, request: bytes, max_receive_bytes: int) -> bytes:
    reader, writer = await asyncio.open_unix_connection(str(socket_path))
    try:
        conn = H2Connection(config=H2Configuration(client_side=True, header_encoding=None))
        conn.local_settings.update({SettingCodes.INITIAL_WINDOW_SIZE: _WINDOW,
                                    SettingCodes.MAX_HEADER_LIST_SIZE: 64 << 10})
        conn.initiate_connection()
        conn.increment_flow_control_window(_WINDOW)
        stream = conn.get_next_available_stream_id()
        conn.send_headers(stream, [(b":method", b"POST"), (b":scheme", b"http"), (b":path", method.encode()),
                                   (b":authority", b"localhost"), (b"content-type", b"application/grpc"),
                                   (b"te", b"trailers"), (b"user-agent", b"gpu-cost-exporter")])
        conn.send_data(stream, struct.pack(">BI", 0, len(request)) + request, end_stream=True)
        writer.write(conn.data_to_send())
        response = await _receive(conn, reader, writer=writer, stream=stream, max_receive_bytes=max_receive_bytes)
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
    return _message(response)


async def _receive(conn: H2Connection, reader: asyncio.StreamReader, *, writer: asyncio.StreamWriter, stream: int,
                   max_receive_bytes: int) -> _Response:
    response = _Response()
    while not response.ended:
        data = await reader.read(1 << 16)
        if not data:
            raise GrpcError(UNAVAILABLE, "connection closed before the call ended")
        for event in conn.receive_data(data):
            if isinstance(event, ConnectionTerminated):
                raise GrpcError(UNAVAILABLE, f"connection ended by the peer (HTTP/2 error {event.error_code})")
            if getattr(event, "stream_id", stream) != stream:
                continue
            if isinstance(event, ResponseReceived | TrailersReceived):
                _headers(response, list(event.headers or []))
            elif isinstance(event, DataReceived):
                body = response.body = response.body if response.body is not None else bytearray()
                body += event.data or b""
                if len(body) > max_receive_bytes + 5:
                    raise GrpcError(RESOURCE_EXHAUSTED, f"reply larger than {max_receive_bytes} bytes")
                _reopen(conn, event, stream=stream)
            elif isinstance(event, StreamReset):
                raise GrpcError(UNAVAILABLE, f"stream reset by the peer (HTTP/2 error {event.error_code})")
            elif isinstance(event, StreamEnded):
                response.ended = True
        writer.write(conn.data_to_send())
        await writer.drain()
    return response


def _reopen(conn: H2Connection, event: DataReceived, *, stream: int) -> None:
    """Give back at once the window these bytes used, on the connection and (if still open) the stream.

    Not h2's own heuristic (acknowledge_received_data waits for half of the window we announced): gRPC
    servers may keep a stream at the 64 KiB default, and would then wait for an update that never comes."""
    size = event.flow_controlled_length or 0
    if size:
        conn.increment_flow_control_window(size)
        with contextlib.suppress(StreamClosedError):  # its last frames may be read in the same batch
            conn.increment_flow_control_window(size, stream_id=stream)


def _message(response: _Response) -> bytes:
    """The one length-prefixed message of a successful reply, or the error its status says."""
    if response.grpc_status is None:
        code = UNIMPLEMENTED if response.status == 404 else (UNAVAILABLE if response.status != 200 else INTERNAL)
        raise GrpcError(code, f"HTTP {response.status} without a gRPC status")
    if response.grpc_status != OK:
        raise GrpcError(response.grpc_status, response.grpc_message)
    body = bytes(response.body or b"")
    if len(body) < 5:
        raise GrpcError(INTERNAL, "reply carries no message")
    compressed, length = struct.unpack(">BI", body[:5])
    if compressed or length != len(body) - 5:
        raise GrpcError(INTERNAL, "reply is compressed or not one whole message")
    return body[5:]
