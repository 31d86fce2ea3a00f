"""An exporter behind kube-rbac-proxy (AMD's, ``scheme: https``): the agent's client verifies the server against
the configured CA and sends the ServiceAccount token as a bearer token -- over https only, never in clear."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from exporter.clients.dcgm import DcgmClient
from exporter.clients.errors import PeerError
from exporter.secrets import SecretFile

TOKEN = "sa-token-of-the-agent"
BODY = 'amd_gpu_gfx_activity{gpu_id="0",hostname="gpu-1"} 42\n'


def self_signed(tmp: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    cert, key = tmp / "cert.pem", tmp / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    return cert, key


@pytest.fixture(name="proxy")
async def _proxy(tmp_path: Path) -> AsyncIterator[tuple[str, str, Path, list[str]]]:
    """kube-rbac-proxy's behaviour: 401 without the right bearer token; the same metrics served on plain http
    on another port, to see what a plain-http client sends."""
    cert, key = self_signed(tmp_path)
    seen: list[str] = []

    async def metrics(req: web.Request) -> web.Response:
        seen.append(req.headers.get("Authorization", ""))
        if req.headers.get("Authorization") != f"Bearer {TOKEN}":
            raise web.HTTPUnauthorized()
        return web.Response(text=BODY)

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    tls = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ctx)
    plain = web.TCPSite(runner, "127.0.0.1", 0)
    await tls.start()
    await plain.start()
    ports = [s.getsockname()[1] for site in (tls, plain) for s in site._server.sockets]  # type: ignore[union-attr]
    try:
        yield f"https://127.0.0.1:{ports[0]}/metrics", f"http://127.0.0.1:{ports[1]}/metrics", cert, seen
    finally:
        await runner.cleanup()


def token_file(tmp: Path) -> SecretFile:
    path = tmp / "token"
    path.write_text(TOKEN + "\n")
    return SecretFile(path)


async def test_https_exporter_gets_the_token_and_is_verified(proxy: tuple[str, str, Path, list[str]],
                                                             tmp_path: Path) -> None:
    https, _plain, cert, seen = proxy
    client = DcgmClient(https, 5.0, max_bytes=1 << 20, token=token_file(tmp_path),
                        ssl_context=ssl.create_default_context(cafile=str(cert)))
    try:
        assert await client.fetch() == BODY and seen == [f"Bearer {TOKEN}"]
    finally:
        await client.close()
    unverified = DcgmClient(https, 5.0, max_bytes=1 << 20, token=token_file(tmp_path))  # system CAs only
    try:
        with pytest.raises(PeerError):
            await unverified.fetch()
    finally:
        await unverified.close()


async def test_the_token_never_goes_over_plain_http(proxy: tuple[str, str, Path, list[str]], tmp_path: Path) -> None:
    _https, plain, _cert, seen = proxy
    client = DcgmClient(plain, 5.0, max_bytes=1 << 20, token=token_file(tmp_path))
    try:
        with pytest.raises(PeerError):
            await client.fetch()  # 401: no token sent
    finally:
        await client.close()
    assert seen == [""]
