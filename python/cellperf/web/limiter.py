"""At most N connections per host: a reverse proxy on the MN's loopback between the browser
and the origin, for HTTP/1.1 loads.

Why: Chromium has no setting for its per-host limit. It is fixed at 6 connections per
host for HTTP/1.1 (net's max_sockets_per_group); the enterprise policy
MaxConnectionsPerProxy is machine-wide and counts connections to a proxy, and through a
forward proxy Chromium still keeps 6 per destination (measured: a limit of 10 opened 6).
So the browser loads the page from this proxy over HTTP/2 on loopback (one connection, every
request at once, no delay, no loss), and the proxy fetches from the origin through the link
over at most N keep-alive HTTP/1.1 connections (aiohttp's per-host limit), queueing the other
requests as a browser limited to N would. Bodies pass through as they come, still
compressed. The connections it opens are counted per load; tests check them against the
capture. Objects on other hosts than the origin (a saved real site) are fetched by the
browser directly, at its own limit.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from pathlib import Path

_HOP_BY_HOP = {"connection", "proxy-connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade",
               "host", "content-length", ":authority", ":method", ":path", ":scheme"}


class ConnectionLimiter:
    """A proxy for `origin` (scheme://host:port) in its own thread: `with
    ConnectionLimiter(origin) as lim: lim.base` is the loopback URL to load instead;
    `lim.reset(n)` before each load starts a fresh pool of at most n connections (a cold
    load opens its own); `lim.opened` counts what the pool opened since."""

    def __init__(self, origin: str):
        self.origin = origin.rstrip("/")
        self.base = ""
        self.opened = 0
        self._session = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._stop: asyncio.Event | None = None
        self._started = threading.Event()
        self._failure: BaseException | None = None
        self._tmp = tempfile.TemporaryDirectory(prefix="cellperf-limiter-")
        from cellperf.web.server import self_signed_cert

        #: Its certificate, made before the browser starts so that the browser trusts it
        #: (`tls.spki`): Chromium keeps nothing of a response with a certificate error in its
        #: HTTP cache, so a warm-cache load through an untrusted proxy would fetch everything again.
        self.tls = self_signed_cert(Path(self._tmp.name))

    def start(self) -> ConnectionLimiter:
        """Starts it in the background (it takes ~0.5 s: start it beside the browser)."""
        if not self._thread.is_alive():
            self._thread.start()
        return self

    def wait(self) -> ConnectionLimiter:
        """Returns once it listens (`base` is set)."""
        self._started.wait(timeout=30)
        if self._failure is not None or not self.base:
            raise RuntimeError(f"connection limiter did not start: {self._failure}")
        return self

    def __enter__(self) -> ConnectionLimiter:
        return self.start().wait()

    def __exit__(self, *exc) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)
        self._tmp.cleanup()

    def reset(self, limit: int) -> None:
        asyncio.run_coroutine_threadsafe(self._new_pool(limit), self._loop).result(timeout=10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as e:  # reported to the caller by __enter__
            self._failure = e
            self._started.set()

    async def _serve(self) -> None:
        from hypercorn.asyncio import serve
        from hypercorn.config import Config

        from cellperf.web.server import bind

        self._stop = asyncio.Event()
        await self._new_pool(6)
        sock = bind("127.0.0.1:0")
        config = Config()
        config.bind = [f"fd://{sock.fileno()}"]
        config.certfile, config.keyfile = str(self.tls.cert), str(self.tls.key)
        config.alpn_protocols = ["h2"]
        config.h2_max_concurrent_streams = 1000
        config.keep_alive_timeout = 120
        config.accesslog = config.errorlog = None
        self.base = f"https://127.0.0.1:{sock.getsockname()[1]}"
        self._loop.call_soon(self._started.set)
        try:
            await serve(self._forward, config, shutdown_trigger=self._stop.wait)
        finally:
            await self._session.close()
            sock.close()

    async def _new_pool(self, limit: int) -> None:
        import aiohttp

        if self._session is not None:
            await self._session.close()
        self.opened = 0
        trace = aiohttp.TraceConfig()

        async def created(session, ctx, params):
            self.opened += 1

        trace.on_connection_create_end.append(created)
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=limit, keepalive_timeout=120, ttl_dns_cache=None,
                                         ssl=False)
        self._session = aiohttp.ClientSession(connector=connector, auto_decompress=False, trace_configs=[trace],
                                              timeout=aiohttp.ClientTimeout(total=None, sock_connect=60),
                                              skip_auto_headers=("User-Agent", "Accept-Encoding"))

    async def _forward(self, scope, receive, send) -> None:
        import aiohttp

        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        path = scope["raw_path"].decode() + (f"?{scope['query_string'].decode()}" if scope["query_string"] else "")
        headers = [(k.decode(), v.decode()) for k, v in scope["headers"] if k.decode().lower() not in _HOP_BY_HOP]
        try:
            async with self._session.request(scope["method"], self.origin + path, headers=headers, data=body or None,
                                             allow_redirects=False) as up:
                out = [(k.lower().encode(), v.encode()) for k, v in up.headers.items() if k.lower() not in _HOP_BY_HOP]
                if up.content_length is not None:
                    out.append((b"content-length", str(up.content_length).encode()))
                await send({"type": "http.response.start", "status": up.status, "headers": out})
                async for chunk in up.content.iter_any():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b""})
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            # The browser sees the origin's failure as a gateway error naming it.
            reason = f"{type(e).__name__}: {e}".encode()
            await send({"type": "http.response.start", "status": 502,
                        "headers": [(b"content-type", b"text/plain"), (b"x-cellperf-error", reason[:200])]})
            await send({"type": "http.response.body", "body": reason})
