"""At most N connections per host: a forward HTTP proxy on the MN's loopback that the
browser uses for HTTP/1.1 loads.

Why a proxy: Chromium has no switch for its per-host limit. It is fixed at 6 connections
per host for HTTP/1.1 (net's max_sockets_per_group), the only setting is the enterprise
policy MaxConnectionsPerProxy (machine-wide, clamped to 6..99) and the old
--max-connections-per-host flag is gone. So the browser talks to this proxy over loopback
(no delay, no loss), and the proxy fetches from the origin through the link over at most N
keep-alive connections per host (aiohttp's connector limit), queueing the other requests as
a browser limited to N would. Bodies pass through as they come, still compressed.
The connections it opens are counted per load; tests check them against the capture.
"""

from __future__ import annotations

import asyncio
import threading

_HOP_BY_HOP = {"connection", "proxy-connection", "keep-alive", "te", "trailer", "transfer-encoding", "upgrade",
               "proxy-authorization", "proxy-authenticate", "host", "content-length"}


class ConnectionLimiter:
    """A proxy running in its own thread: `with ConnectionLimiter() as lim: lim.port`;
    `lim.reset(n)` before each load starts a fresh pool of at most n connections per host
    (a cold load opens its own), `lim.opened` is what the pool opened since."""

    def __init__(self):
        self.port = 0
        self.opened = 0
        self._limit = 6
        self._session = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner = None

    def __enter__(self) -> ConnectionLimiter:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def reset(self, limit: int) -> None:
        asyncio.run_coroutine_threadsafe(self._new_pool(limit), self._loop).result(timeout=10)

    async def _new_pool(self, limit: int) -> None:
        import aiohttp

        if self._session is not None:
            await self._session.close()
        self._limit, self.opened = limit, 0
        trace = aiohttp.TraceConfig()

        async def created(session, ctx, params):
            self.opened += 1

        trace.on_connection_create_end.append(created)
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=limit, keepalive_timeout=120, ttl_dns_cache=None)
        self._session = aiohttp.ClientSession(connector=connector, auto_decompress=False, trace_configs=[trace],
                                              timeout=aiohttp.ClientTimeout(total=None, sock_connect=60))

    async def _start(self) -> None:
        from aiohttp import web

        await self._new_pool(self._limit)
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _forward(self, request):
        import aiohttp
        from aiohttp import web

        url = str(request.url) if request.url.is_absolute() and request.url.host != "127.0.0.1" else request.path_qs
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP_BY_HOP}
        body = await request.read() if request.can_read_body else None
        try:
            async with self._session.request(request.method, request.raw_path if request.raw_path.startswith("http") else url,
                                             headers=headers, data=body, allow_redirects=False) as up:
                out = web.StreamResponse(status=up.status, reason=up.reason)
                for k, v in up.headers.items():
                    if k.lower() not in _HOP_BY_HOP:
                        out.headers.add(k, v)
                if up.content_length is not None:
                    out.content_length = up.content_length
                await out.prepare(request)
                async for chunk in up.content.iter_any():
                    await out.write(chunk)
                await out.write_eof()
                return out
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            return web.Response(status=502, text=f"cellperf proxy: {type(e).__name__}: {e}\n")
