"""Page loads in a real browser: Debian's Chromium, headless, driven by Playwright (never a
browser Playwright downloads). One browser per call; each load in a fresh context (a cold
cache) or, for a warm cache, a context that loaded the page once before.

Metrics come from the browser itself (docs/methods.md §13): Navigation Timing (time to first byte =
responseStart, DOMContentLoaded, load event, all from navigation start), Paint Timing (first
contentful paint) and Largest Contentful Paint where Chromium reports them, Resource Timing
per object (type, start, duration, bytes, protocol). HTTP/1.1 loads go through the
connection limiter (limiter.py); their connections are those it opened through the link.
For HTTP/2 they are the distinct connection ids of the responses (DevTools protocol).
"""

from __future__ import annotations

import os
import shutil
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from cellperf.errors import UserError

#: Debian's Chromium: the binary itself (/usr/bin/chromium is a wrapper script).
CHROMIUM_PATHS = ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "/usr/bin/chromium-browser")
#: Flags that keep the browser's own traffic (updates, safe browsing, metrics) off the link.
_QUIET = ["--disable-background-networking", "--disable-component-update", "--disable-default-apps",
          "--disable-sync", "--metrics-recording-only", "--no-first-run", "--disable-quic",
          "--disable-features=OptimizationHints,MediaRouter,Translate,InterestFeedContentSuggestions"]

# Runs in the page after the load event: the browser's own timing entries, and LCP, which
# exists only through a buffered PerformanceObserver.
_METRICS_JS = """async () => {
  const lcp = await new Promise(resolve => {
    let last = null;
    try {
      new PerformanceObserver(l => { const e = l.getEntries(); if (e.length) last = e[e.length - 1]; })
        .observe({type: 'largest-contentful-paint', buffered: true});
    } catch (e) { resolve(null); return; }
    setTimeout(() => resolve(last ? last.startTime : null), 50);
  });
  const nav = performance.getEntriesByType('navigation')[0].toJSON();
  const paint = Object.fromEntries(performance.getEntriesByType('paint').map(p => [p.name, p.startTime]));
  const res = performance.getEntriesByType('resource').map(r => r.toJSON());
  return {nav, paint, lcp, res};
}"""


def find_chromium() -> str | None:
    override = os.environ.get("CELLPERF_CHROMIUM")
    if override:
        return override
    for p in CHROMIUM_PATHS:
        if os.access(p, os.X_OK):
            return p
    return shutil.which("chromium")


@dataclass
class Load:
    """One page load: its row in `page_loads` and its objects (rows of `page_objects`)."""

    row: dict
    objects: list[dict] = field(default_factory=list)


def _kind(url: str, content_type: str, initiator: str) -> str:
    ct = (content_type or "").lower()
    for key, kind in (("html", "html"), ("css", "css"), ("javascript", "js"), ("gif", "gif"), ("jpeg", "jpeg"),
                      ("png", "png"), ("image/", "image"), ("font", "font")):
        if key in ct:
            return kind
    return initiator or "other"


def _failed(page: str, reason: str, **row) -> Load:
    return Load({"page": page, "status": "failed", "reason": reason.strip().splitlines()[0][:300], **row})


def load_pages(pages: list[tuple[str, str]], *, connections: list[int], http: str = "1.1", cache: str = "cold",
               loads: int = 1, timeout_s: float = 60.0, idle_s: float | None = None, chromium: str | None = None,
               trust_spki: list[str] = ()) -> tuple[list[Load], dict]:
    """Loads each (name, url) of `pages` `loads` times for each connection limit; HTTPS
    servers whose certificates' public keys hash to `trust_spki` are trusted. With `idle_s`,
    each load comes `idle_s` seconds after a load of the same page that nothing followed (the
    radio's state after that much silence: `_one_load`).
    Returns the loads (failed ones with the browser's reason) and facts about the session
    (browser version, start-up seconds). UserError when the browser cannot start."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    from cellperf.web.limiter import ConnectionLimiter

    exe = chromium or find_chromium()
    if exe is None or not os.access(exe, os.X_OK):
        raise UserError(f"no Chromium browser found (tried {', '.join(CHROMIUM_PATHS)}; "
                        "install Debian's 'chromium' or set CELLPERF_CHROMIUM)")
    out: list[Load] = []
    t0 = time.monotonic()
    # A limiter per origin of the HTTP/1.1 pages, started while the browser starts.
    limiters = {o: ConnectionLimiter(o).start() for o in {_origin(u) for _, u in pages}
                if http == "1.1" and o.startswith("http://")}
    with ExitStack() as stack:
        for lim in limiters.values():
            stack.callback(lim.__exit__, None, None, None)
        pw = stack.enter_context(sync_playwright())
        # The limiters' certificates are trusted, not merely excused: Chromium's HTTP cache keeps
        # no response that came with a certificate error (a warm cache would stay cold).
        trusted = [*trust_spki, *(lim.tls.spki for lim in limiters.values())]
        args = _QUIET + _resolve_only(pages) + (
            [f"--ignore-certificate-errors-spki-list={','.join(trusted)}"] if trusted else [])
        try:
            browser = pw.chromium.launch(executable_path=exe, args=args, timeout=30_000)
        except PlaywrightError as e:
            raise UserError(f"{exe}: the browser did not start ({str(e).strip().splitlines()[0]})") from None
        session = {"browser": f"chromium {browser.version}", "browser_start_s": round(time.monotonic() - t0, 3)}
        try:
            for n in connections:
                for name, url in pages:
                    limiter = limiters[_origin(url)].wait() if _origin(url) in limiters else None
                    for k in range(loads):
                        out.append(_one_load(browser, limiter, name, url, n, http, cache, k, timeout_s, idle_s))
        finally:
            browser.close()
    return out, session


def _resolve_only(pages: list[tuple[str, str]]) -> list[str]:
    """Chromium's resolver limited to the pages' own host names: its background lookups
    (clients2.google.com, accounts.google.com, update.googleapis.com: seen 1.5 s into a quiet
    pause despite --disable-background-networking) would cross the measured link, show in its
    captures and wake an idle radio before the load that should find it idle."""
    from urllib.parse import urlsplit

    # The loopback of the connection limiters (limiter.py) is looked up through the rules too.
    hosts = sorted({"127.0.0.1", *(h for _, u in pages if (h := urlsplit(u).hostname))})
    return ["--host-resolver-rules=" + ", ".join(["MAP * ~NOTFOUND", *(f"EXCLUDE {h}" for h in hosts)])]


def _origin(url: str) -> str:
    from urllib.parse import urlsplit

    u = urlsplit(url)
    return f"{u.scheme}://{u.netloc}"


def _one_load(browser, limiter, name: str, url: str, connections: int, http: str, cache: str, index: int,
              timeout_s: float, idle_s: float | None = None) -> Load:
    """One load of `url`. With a warm cache it follows a load of the page in the same browser
    context; with `idle_s` it follows a load of the page (that one, or one in a context of its
    own for a cold cache) by `idle_s` seconds of silence: after 0 s the radio is still
    connected, after more than its tail it has to be promoted again (docs/methods.md §13)."""
    from playwright.sync_api import Error as PlaywrightError

    base = {"connections": connections, "http": http, "cache": cache, "load": index, "url": url, "idle_s": idle_s}
    # Through the limiter the browser loads the same path from loopback (see limiter.py).
    target = limiter.base + url[len(limiter.origin):] if limiter else url
    if idle_s is not None and cache == "cold":
        warm_up = browser.new_context(ignore_https_errors=True, service_workers="block")
        try:
            warm_up.new_page().goto(target, wait_until="load", timeout=timeout_s * 1000)
        except PlaywrightError as e:
            return _failed(name, "the load before the idle time failed: " + str(e).removeprefix("Page.goto: "), **base)
        finally:
            warm_up.close()
    ctx = browser.new_context(ignore_https_errors=True, service_workers="block")
    try:
        page = ctx.new_page()
        if limiter:
            limiter.reset(connections)
        if cache == "warm":
            page.goto(target, wait_until="load", timeout=timeout_s * 1000)
            page.goto("about:blank")
            if limiter:
                limiter.reset(connections)  # count this load's connections only
        if idle_s:
            time.sleep(idle_s)
        cdp = ctx.new_cdp_session(page)
        cdp.send("Network.enable")
        # A response from a cache (the disk cache, or the renderer's memory cache: its request
        # "served from cache") names the connection that once brought it, not one of this load.
        responses: dict = {}
        cached: set = set()
        cdp.on("Network.requestServedFromCache", lambda ev: cached.add(ev["requestId"]))
        cdp.on("Network.responseReceived", lambda ev: responses.__setitem__(ev["requestId"], ev["response"]))
        try:
            response = page.goto(target, wait_until="load", timeout=timeout_s * 1000)
        except PlaywrightError as e:
            return _failed(name, str(e).removeprefix("Page.goto: "), **base)
        if response is None:
            return _failed(name, "no response for the page", **base)
        if response.status >= 400:
            why = response.headers.get("x-cellperf-error")  # the limiter could not reach the origin
            return _failed(name, why or f"HTTP {response.status} {response.status_text}", **base)
        m = page.evaluate(_METRICS_JS)
    finally:
        ctx.close()
    nav = m["nav"]
    load_end = nav["loadEventEnd"] or nav["loadEventStart"]
    # The page's objects: those the load event waited for (a late favicon is not the page's).
    res = [r for r in m["res"] if r["startTime"] <= load_end]
    objects = [_object(nav, "navigation", 0)] + [_object(r, r.get("initiatorType"), i + 1) for i, r in enumerate(res)]
    if limiter:
        for o in objects:  # the origin's URLs, not the loopback ones the browser used
            if o["url"].startswith(limiter.base):
                o["url"] = limiter.origin + o["url"][len(limiter.base):]
                o["protocol"] = "http/1.1"
    conn_ids = {r.get("connectionId") for rid, r in responses.items() if rid not in cached and not r.get("fromDiskCache")}
    used = limiter.opened if limiter else len(conn_ids - {None, 0})
    row = {
        "page": name, "status": "ok", "reason": None, **base,
        "load_ms": load_end, "ttfb_ms": nav["responseStart"], "dcl_ms": nav["domContentLoadedEventEnd"],
        "fcp_ms": m["paint"].get("first-contentful-paint"), "lcp_ms": m["lcp"],
        "objects": len(objects), "bytes": sum(o["transfer_bytes"] for o in objects),
        "body_bytes": sum(o["encoded_bytes"] for o in objects), "decoded_bytes": sum(o["decoded_bytes"] for o in objects),
        "connections_used": used, "protocol": "http/1.1" if limiter else nav.get("nextHopProtocol"),
    }
    return Load(row, [{"page": name, "connections": connections, "load": index, **o} for o in objects])


def _object(entry: dict, initiator: str | None, index: int) -> dict:
    return {
        "object": index, "url": entry["name"], "kind": _kind(entry["name"], entry.get("contentType", ""), initiator or ""),
        "start_ms": entry["startTime"], "request_ms": entry.get("requestStart") or None,
        "ttfb_ms": entry.get("responseStart") or None, "end_ms": entry["responseEnd"],
        "transfer_bytes": entry.get("transferSize", 0), "encoded_bytes": entry.get("encodedBodySize", 0),
        "decoded_bytes": entry.get("decodedBodySize", 0), "status": entry.get("responseStatus"),
        "protocol": entry.get("nextHopProtocol"), "encoding": entry.get("contentEncoding") or None,
    }
