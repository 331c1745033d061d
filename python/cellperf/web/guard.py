"""The page server's defences against hostile and broken clients (issue 31: 1,100 half-sent
requests kept every legitimate GET waiting and the server wrote 91,724 tracebacks).

- `GuardedListener`: the listening socket, counting its connections. One over the cap per
  source address is accepted and closed at once, so a flood from one address never takes the
  descriptors another needs; at the cap in all, a newcomer under its address's fair share
  takes the place of the oldest connection of the address holding most. The total stays
  below the process's descriptor limit (asyncio's accept then never fails with EMFILE; it
  retried and logged every time).
- `GuardedConnection`: hypercorn's connection with a deadline on a request's header: from
  accept, and on HTTP/1.1 from the first byte of each later request, the whole header must
  arrive within the header timeout or the connection is closed (slowloris). Hypercorn has
  only a keep-alive timer, which its h11 side runs until a header is complete: 120 s here.
  And a connection that moves no byte for the idle timeout is closed even with a response
  pending (a client that stops reading).
- `BoundedLogHandler`: one line per kind of error per interval, with the count of those not
  written; no tracebacks (an attacker writes the log otherwise).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import sys
import time
from collections import Counter, deque
from ssl import SSLError

from hypercorn.asyncio.tcp_server import MAX_RECV, TCPServer
from hypercorn.events import Closed, RawData, Updated
from hypercorn.protocol.h11 import H11Protocol

#: Descriptors kept for what a connection does not account for: standard streams, the event
#: loop's, the listening socket, a file being read, the certificate, the log.
RESERVED_FDS = 32
LOG_INTERVAL_S = 10.0

log = logging.getLogger("cellperf.web")


def connection_cap(wanted: int) -> int:
    """`wanted`, or fewer if the process's descriptor limit leaves room for fewer (with the
    connections being closed for newcomers, `GuardedListener.MAX_CLOSING`)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - RESERVED_FDS - GuardedListener.MAX_CLOSING))


class BoundedLogHandler(logging.Handler):
    """Writes a record's first line (message and exception, no traceback) the first time its
    kind is seen in an interval; later ones of that kind in the interval are counted, and the
    count is written with the kind's next line (or by `flush`)."""

    def __init__(self, stream=None, interval_s: float = LOG_INTERVAL_S, clock=time.monotonic):
        super().__init__()
        self.stream = stream if stream is not None else sys.stderr
        self.interval_s, self.clock = interval_s, clock
        self._last: dict[tuple, float] = {}
        self._suppressed: Counter = Counter()
        self._text: dict[tuple, str] = {}  # each kind's last line written

    def emit(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if record.exc_info else None
        kind = (record.msg, type(exc).__name__ if exc else None)
        now = self.clock()
        if now - self._last.get(kind, -float("inf")) < self.interval_s:
            self._suppressed[kind] += 1
            return
        self._last[kind] = now
        self._write(kind, record.getMessage() + (f" ({type(exc).__name__}: {exc})" if exc else ""))

    def flush(self) -> None:
        """Writes the counts not written yet (at the end)."""
        for kind in list(self._suppressed):
            self._write(kind, self._text[kind])

    def _write(self, kind: tuple, text: str) -> None:
        self._text[kind] = text
        more = self._suppressed.pop(kind, 0)
        tail = f" [and {more} more like it in the last {self.interval_s:.0f} s]" if more else ""
        self.stream.write(f"cellperf web serve: {' '.join(text.split())[:300]}{tail}\n")
        self.stream.flush()


def bounded_log() -> BoundedLogHandler:
    """Sends `log` (hypercorn's error log and the event loop's) to stderr through a
    BoundedLogHandler, and returns it (flush it at the end)."""
    handler = BoundedLogHandler()
    log.addHandler(handler)
    log.propagate = False
    return handler


def log_loop_error(loop, context: dict) -> None:
    """The event loop's errors (a failed accept, a callback's exception) into the bounded
    log, not as a traceback each. A connection's task cancelled while asyncio's own callback
    looks at it (an aborted TLS connection, the shutdown) is no error."""
    exc = context.get("exception")
    if not isinstance(exc, asyncio.CancelledError):
        log.error(context["message"], exc_info=exc)


class _CountedConnection(socket.socket):
    """An accepted connection that tells its listener when it is closed (asyncio closes the
    socket when the connection ends, however it ends)."""

    listener: GuardedListener | None = None
    source = ""  # the peer's address

    def _real_close(self, *args) -> None:
        if self.listener is not None:
            self.listener._release(self)
            self.listener = None
        super()._real_close(*args)


class GuardedListener(socket.socket):
    """Wraps a listening socket (`GuardedListener.wrap(sock, ...)`); asyncio accepts through
    `accept`, which turns away a connection over `max_per_source` from its address (closed at
    once; the next queued one is tried). At `max_total` in all, a newcomer from an address
    holding less than its fair share (`max_total` over the addresses connected) takes the
    place of the oldest connection of the address holding most (shut down): under a flood
    from many addresses a browser still gets in. Otherwise it is turned away."""

    max_total: int
    max_per_source: int
    #: Connections shut down for newcomers that asyncio has not closed yet (it closes them a
    #: few loop turns later): they still hold their descriptors, so only so many at once.
    MAX_CLOSING = 64

    @classmethod
    def wrap(cls, sock: socket.socket, *, max_total: int, max_per_source: int) -> GuardedListener:
        guarded = cls(sock.family, sock.type, sock.proto, fileno=sock.detach())
        guarded.max_total, guarded.max_per_source = max_total, max_per_source
        guarded._held = {}  # address -> its open connections, oldest first
        guarded._open = 0  # held and closing
        return guarded

    def accept(self):
        while True:
            fd, addr = self._accept()  # BlockingIOError when none is waiting: asyncio's cue
            conn = _CountedConnection(self.family, self.type, self.proto, fileno=fd)
            held = self._held.setdefault(addr[0], deque())
            if len(held) >= self.max_per_source:
                log.warning("refused connections over the cap of %d from one address", self.max_per_source)
            elif self._open >= self.max_total and not self._make_room(len(held)):
                log.warning("refused connections over the cap of %d in all", self.max_total)
            else:
                held.append(conn)
                self._open += 1
                conn.listener, conn.source = self, addr[0]
                return conn, addr
            if not held:
                del self._held[addr[0]]
            conn.close()

    def _make_room(self, newcomers_count: int) -> bool:
        """Shuts down the oldest connection of the address holding most, if the newcomer's
        address holds less than its fair share and less than that one; asyncio then closes
        it. True if it did. (Without the fair share, attackers took each other's places as
        fast as they reconnected, and a browser found every place being taken.)"""
        fair_share = self.max_total // len(self._held)
        if newcomers_count >= fair_share or self._open >= self.max_total + self.MAX_CLOSING:
            return False
        source = max(self._held, key=lambda s: len(self._held[s]))
        if len(self._held[source]) <= newcomers_count:
            return False
        oldest = self._held[source].popleft()
        try:
            oldest.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # closed meanwhile
        log.warning("closed the oldest connection of %s, the address holding most, for a newcomer at the cap of %d "
                    "in all", source, self.max_total)
        return True

    def _release(self, conn: _CountedConnection) -> None:
        self._open -= 1
        held = self._held.get(conn.source)
        if held is not None and conn in held:
            held.remove(conn)
        if held is not None and not held:
            del self._held[conn.source]


class GuardedConnection(TCPServer):
    """Hypercorn's connection (asyncio), plus: a request's header must be complete within
    `config.header_timeout` s (see the module's doc), a connection that moves no byte for
    the idle timeout is aborted, one hypercorn fails on is dropped with one log line, and the
    connection closes as soon as the client has closed its side.

    Why the close: hypercorn (0.17, 0.18) stops reading at the client's FIN, but the
    connection's task group then waits for its keep-alive timer (120 s), so the server's side
    stays in CLOSE-WAIT and sends its FIN two minutes later: long after the run's link is
    gone, to an MN address a later run may hold; and the runner's drain (campaign/testbed.py)
    waited its whole 5 s for it after every web run. A client's FIN is the end of its
    requests, and hypercorn already drops the response in progress on it."""

    async def run(self) -> None:
        self._idle = True
        self._header_deadline = self.loop.time() + self.config.header_timeout
        self._moved = 0  # bytes read and written so far, for `_close_when_stalled`
        watchdog = self.loop.create_task(self._close_when_stalled())
        try:
            await super().run()
        except Exception as e:  # noqa: BLE001 - whatever the HTTP library fails on ends one connection
            # A request hypercorn itself fails on (an HTTP/2 :path that is not ASCII, none
            # at all; found by tests/web/fuzz_server.py): the connection is dropped, and logged.
            while isinstance(e, BaseExceptionGroup):
                e = e.exceptions[0]
            log.warning("dropped a connection the HTTP library failed on", exc_info=e)
        finally:
            watchdog.cancel()

    async def protocol_send(self, event) -> None:
        if isinstance(event, Updated):
            # Idle: between requests (the keep-alive timer runs); busy: a header is complete.
            self._idle, self._header_deadline = event.idle, None
        elif isinstance(event, RawData):
            self._moved += len(event.data)
        await super().protocol_send(event)

    async def _close_when_stalled(self) -> None:
        """Aborts the connection once no byte has moved either way (read, written, or left
        the send buffer) for the idle timeout, a response pending or not: a client that
        stops reading, or stops granting HTTP/2 flow-control credit, held it for ever
        (hypercorn has no write timeout; found by tests/web/fuzz_server.py). A slow link
        still moves bytes; an outage shorter than the timeout is waited out."""
        timeout = self.config.keep_alive_timeout
        transport = self.writer.transport
        seen, since = None, self.loop.time()
        while True:
            await asyncio.sleep(min(1.0, timeout / 4))
            state = (self._moved, transport.get_write_buffer_size())
            if state != seen:
                seen, since = state, self.loop.time()
            elif self.loop.time() - since >= timeout:
                transport.abort()  # close() would wait for the unsent bytes
                return

    async def _read_data(self) -> None:
        while not self.reader.at_eof():
            timeout = None if self._header_deadline is None else max(0.0, self._header_deadline - self.loop.time())
            try:
                data = await asyncio.wait_for(self.reader.read(MAX_RECV), timeout)
            except (ConnectionError, OSError, asyncio.TimeoutError, TimeoutError, SSLError):
                break
            # A later request's first bytes start its header's clock. HTTP/1.1 only: an idle
            # HTTP/2 connection carries PINGs and settings that start no request.
            if self._idle and self._header_deadline is None and isinstance(self.protocol.protocol, H11Protocol):
                self._header_deadline = self.loop.time() + self.config.header_timeout
            self._moved += len(data)
            await self.protocol.handle(RawData(data))
        await self.protocol.handle(Closed())
        await self._close()


def install_guarded_connections() -> None:
    """Makes hypercorn's asyncio worker build `GuardedConnection`s (it has no
    setting for the class; this is the one place that depends on its internals)."""
    from hypercorn.asyncio import run

    run.TCPServer = GuardedConnection
