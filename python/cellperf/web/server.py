"""The web server at the CN: static files of a page folder over HTTP/1.1 (keep-alive) or
HTTP/2 (over TLS, as browsers speak it), with server compression on or off.

Hypercorn (h11 / h2) does the protocol; this module is the application: files under the
root only, a content type by extension, and gzip of text types (HTML, CSS, JavaScript, ...)
when compression is on and the browser accepts it, as IIS's standard compression did in
004 §VI.A; images are sent as they are. Compressed bodies are made once per file and kept.
HTTP/3 is not offered: hypercorn needs aioquic for it and Chromium accepts QUIC only with a
trusted certificate (a self-signed one is refused even with --ignore-certificate-errors).
What a hostile client may hold of the server (connections, time, log lines) is bounded in
guard.py.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import mimetypes
import re
import signal
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cellperf.errors import UserError, os_reason

_COMPRESSIBLE = ("text/", "application/javascript", "application/json", "image/svg+xml", "application/xml")
HTTP_VERSIONS = ("1.1", "2")
#: Longer request paths get 414 (no page of ours has one; the file system's limit is 4,096).
MAX_PATH_BYTES = 2048


class StaticApp:
    """ASGI application serving `root`; `compress` turns gzip on."""

    def __init__(self, root: Path, compress: bool):
        self.root = root.resolve()
        self.compress = compress
        self._gz: dict[Path, bytes] = {}

    def _file(self, path: str) -> Path | None:
        """The file `path` names under the root, or None. `path` is the request's, already
        decoded by hypercorn (decoding it again would make `/%2500` a NUL); one the file
        system refuses (too long, a NUL) names no file."""
        try:
            target = (self.root / path.lstrip("/")).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.is_relative_to(self.root) or not target.is_file():
                return None
        except (OSError, ValueError):
            return None
        return target

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] == "websocket":  # refused (403); returning without a word is a 500
            await send({"type": "websocket.close"})
            return
        if scope["type"] != "http":
            return
        if len(scope["raw_path"]) > MAX_PATH_BYTES:
            await self._reply(send, 414, b"path too long\n", "text/plain")
            return
        target = self._file(scope["path"]) if scope["method"] in ("GET", "HEAD") else None
        if target is None:
            await self._reply(send, 404, b"not found\n", "text/plain")
            return
        ctype = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
        accepts = b"gzip" in dict(scope["headers"]).get(b"accept-encoding", b"")
        headers = []
        if self.compress and ctype.startswith(_COMPRESSIBLE):
            headers.append((b"vary", b"accept-encoding"))
            if accepts:
                body = self._gz.get(target)
                if body is None:
                    body = self._gz[target] = gzip.compress(target.read_bytes(), compresslevel=6)
                headers.append((b"content-encoding", b"gzip"))
            else:
                body = target.read_bytes()
        else:
            body = target.read_bytes()
        await self._reply(send, 200, body if scope["method"] == "GET" else b"", ctype, headers, len(body))

    @staticmethod
    async def _reply(send, status, body, ctype, headers=(), length=None):
        # max-age lets a warm-cache load use the browser's cache, as a real site's images do.
        hdrs = [(b"content-type", ctype.encode()), (b"content-length", str(len(body) if length is None else length).encode()),
                (b"cache-control", b"max-age=3600"), *headers]
        await send({"type": "http.response.start", "status": status, "headers": hdrs})
        await send({"type": "http.response.body", "body": body})


def bind(listen: str) -> socket.socket:
    """A listening socket on HOST:PORT (port 0: any free one), or `fd:N`, one this process
    inherited (the campaign runner binds it and starts the emulator while the server starts:
    connections wait in its backlog); UserError if in use or not a listening socket."""
    if listen.startswith("fd:"):
        try:
            sock = socket.socket(fileno=int(listen[3:]))
        except (ValueError, OSError) as e:
            reason = os_reason(e) if isinstance(e, OSError) else "not a number"
            raise UserError(f"--listen {listen}: not a socket this process inherited ({reason})") from None
        if not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
            raise UserError(f"--listen {listen}: not a listening socket")
        return sock
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    try:
        port_n = int(port)
        if not 0 <= port_n <= 65535:
            raise ValueError
    except ValueError:
        raise UserError(f"--listen {listen}: expected HOST:PORT with a port 0..65535") from None
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port_n))
    except OSError as e:
        sock.close()
        raise UserError(f"--listen {listen}: cannot listen there ({os_reason(e)})") from None
    # Accepted connections inherit it (Linux): a response's header and body writes leave at
    # once instead of the body waiting on the browser's delayed ACK (nginx does the same).
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.listen(1024)
    return sock


@dataclass(frozen=True)
class Certificate:
    """A throw-away certificate: its files, and the SHA-256 of its public key in base64, which
    Chromium's --ignore-certificate-errors-spki-list takes (browser.py)."""

    cert: Path
    key: Path
    spki: str


def self_signed_cert(folder: Path) -> Certificate:
    """A throw-away certificate for HTTP/2 over TLS (the browser is told to trust it)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    p = subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                        "-nodes", "-days", "2", "-subj", "/CN=cellperf", "-keyout", str(key), "-pubkey"],
                       capture_output=True, text=True)
    blocks = dict(re.findall(r"-----BEGIN ([A-Z ]+)-----\n(.*?)-----END \1-----", p.stdout, re.S))
    if p.returncode != 0 or not {"PUBLIC KEY", "CERTIFICATE"} <= blocks.keys():
        reason = (p.stderr.strip().splitlines() or ["no certificate in its output"])[-1]
        raise UserError(f"openssl could not make a certificate for HTTP/2: {reason}")
    cert.write_text(f"-----BEGIN CERTIFICATE-----\n{blocks['CERTIFICATE']}-----END CERTIFICATE-----\n")
    spki = hashlib.sha256(base64.b64decode(blocks["PUBLIC KEY"])).digest()
    return Certificate(cert, key, base64.b64encode(spki).decode())


@dataclass(frozen=True)
class Limits:
    """What one client may hold of the server: connections from one address and in all (the
    total is lowered to fit the process's descriptor limit), and how long a request's header
    may take to arrive and an idle keep-alive connection may stay (seconds)."""

    max_connections: int = 512
    max_per_source: int = 64
    header_timeout_s: float = 20.0
    idle_timeout_s: float = 120.0


def _hypercorn_config(limits: Limits, tls: Certificate | None):
    """Hypercorn's settings for the page server, its connections built by
    guard.GuardedConnection, and its errors written to the bounded log."""
    from hypercorn.config import Config

    from cellperf.web.guard import install_guarded_connections, log

    install_guarded_connections()
    config = Config()
    config.keep_alive_timeout = limits.idle_timeout_s  # a page's connections stay open between its objects
    config.header_timeout = limits.header_timeout_s  # read by guard.GuardedConnection
    config.ssl_handshake_timeout = limits.header_timeout_s
    config.accesslog = None
    config.errorlog = log
    config.alpn_protocols = ["http/1.1"]
    if tls is not None:
        config.certfile, config.keyfile = str(tls.cert), str(tls.key)
        config.alpn_protocols = ["h2", "http/1.1"]
    return config


def serve(root: Path, sock: socket.socket, *, compress: bool, http: str, ready, limits: Limits = Limits()) -> None:
    """Serves until SIGINT/SIGTERM. `ready(url_base, spki)` is called once listening; `spki`
    identifies the HTTP/2 server's certificate for `cellperf web load --trust-spki` (None for
    HTTP/1.1)."""
    from hypercorn.asyncio import worker_serve
    from hypercorn.config import Sockets
    from hypercorn.utils import wrap_app

    from cellperf.web.guard import GuardedListener, bounded_log, connection_cap, log_loop_error

    handler = bounded_log()
    host, port = sock.getsockname()[:2]
    listener = GuardedListener.wrap(sock, max_total=connection_cap(limits.max_connections),
                                    max_per_source=limits.max_per_source)
    with tempfile.TemporaryDirectory(prefix="cellperf-web-") as tmp:
        tls = self_signed_cert(Path(tmp)) if http == "2" else None
        config = _hypercorn_config(limits, tls)
        sockets = Sockets(secure_sockets=[listener] if tls else [], insecure_sockets=[] if tls else [listener],
                          quic_sockets=[])
        scheme = "https" if tls else "http"

        async def main():
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            loop.set_exception_handler(log_loop_error)
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            loop.call_soon(ready, f"{scheme}://{host}:{port}", tls and tls.spki)
            await worker_serve(wrap_app(StaticApp(root, compress), config.wsgi_max_body_size, "asgi"), config,
                               sockets=sockets, shutdown_trigger=stop.wait)

        try:
            asyncio.run(main())
        finally:
            handler.flush()  # the counts of lines not written yet
