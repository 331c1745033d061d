"""Web page loads in headless Chromium: pages, server, browser timings.

docs/methods.md §13, seed 004 §VI.A. `pages` writes the three pages of 004 Table VI; `serve` serves a
page folder over HTTP/1.1 or HTTP/2 with compression on or off; `load` loads pages in
headless Chromium and reports the browser's own timings. In a campaign (`type = "web"`) the
runner does all three around the emulated link (docs/web.md).

Examples:
  cellperf web pages pages/
  cellperf web serve pages/ --listen 0.0.0.0:8080 --compression on
  sudo cellperf emulate --profile umts-stationary -- \\
      cellperf web load 'http://$CELLPERF_CN:8080/cnn/' --connections 2,10 \\
        --json
  cellperf web load https://example.org/ --http 2        # a real network
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from cellperf.cli import add_subcommand, add_subcommands, file_path, folder_path
from cellperf.errors import UserError
from cellperf.validate import number_arg


def pages_command(args: argparse.Namespace) -> None:
    """Write the page set of 004 Table VI (yahoo, starwars, cnn) into a folder.

    Object counts, types and byte shares follow the table; contents are generated (seeded),
    nothing is fetched. Each page is FOLDER/NAME/index.html with its objects beside it.

    Examples:
      cellperf web pages pages/
      cellperf web pages pages/ --json
    """
    from cellperf.web.pages import write_pages

    try:
        written = write_pages(args.folder)
    except OSError as e:
        raise UserError(f"{args.folder}: cannot write the pages ({e.strerror})") from None
    summary = {name: {"objects": len(objs), "bytes": sum(o.size for o in objs),
                      "by_type": {k: sum(o.size for o in objs if o.kind == k) for k in ("html", "gif", "jpeg", "css", "js")}}
               for name, objs in written.items()}
    if args.as_json:
        print(json.dumps({"folder": str(args.folder), "pages": summary}))
        return
    print(f"{'page':10} {'objects':>7} {'kB':>7}  {'HTML':>5} {'GIF':>5} {'JPEG':>5} {'CSS':>5} {'JS':>5}  (% of bytes)")
    for name, s in summary.items():
        shares = " ".join(f"{100 * s['by_type'][k] / s['bytes']:5.1f}" for k in ("html", "gif", "jpeg", "css", "js"))
        print(f"{name:10} {s['objects']:7d} {s['bytes'] / 1000:7.1f}  {shares}")


def check_site(folder: Path) -> None:
    """A page folder must hold pages: an index.html at its top or in a sub-folder."""
    if not folder.is_dir():
        raise UserError(f"{folder}: no such page folder")
    if not (folder / "index.html").is_file() and not any(folder.glob("*/index.html")):
        raise UserError(f"{folder}: no index.html in the folder or its sub-folders (not a page folder)")


def serve_command(args: argparse.Namespace) -> None:
    """Serve a page folder (HTTP/1.1 keep-alive or HTTP/2 over TLS) until stopped.

    With --compression on, HTML, CSS and JavaScript are sent gzip-compressed to browsers
    that accept it (images never are). With --json the first line on stdout is
    {"url": "http://HOST:PORT", "spki": null} once listening; over HTTP/2 `spki` names the
    self-signed certificate for `cellperf web load --trust-spki`. Stop with Ctrl-C or SIGTERM.

    Hostile clients: a connection over --max-per-source from one address is closed at once;
    at --max-connections in all (fewer if `ulimit -n` leaves room for fewer) a newcomer from
    an address holding less than its fair share takes the place of the oldest connection of
    the address holding most. A request whose header is not complete --header-timeout after the connection opened
    (or after its first byte, on a kept-alive connection) is dropped, as is a connection that
    moves no byte for --idle-timeout. Errors are logged as one line per kind per 10 s, with
    the count of those not written; a path the file system refuses is a 404, one over 2,048
    bytes a 414.

    Examples:
      cellperf web serve pages/ --listen 0.0.0.0:8080
      cellperf web serve pages/ --http 2 --compression on --json
      cellperf web serve pages/ --max-per-source 16 --header-timeout 5
    """
    from cellperf.web.server import Limits, bind, serve

    check_site(args.folder)
    sock = bind(args.listen)

    def ready(url: str, spki: str | None) -> None:
        trust = f" (cellperf web load --trust-spki {spki})" if spki else ""
        print(json.dumps({"url": url, "spki": spki}) if args.as_json else f"serving {args.folder} on {url}{trust}",
              flush=True)

    limits = Limits(args.max_connections, args.max_per_source, args.header_timeout, args.idle_timeout)
    serve(args.folder, sock, compress=args.compression == "on", http=args.http, ready=ready, limits=limits)


def _connection_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a list of whole numbers (e.g. 2,4,10)") from None
    if not values or any(not 1 <= v <= 32 for v in values):
        raise argparse.ArgumentTypeError(f"'{text}': connections per host must be 1..32")
    return values


def load_command(args: argparse.Namespace) -> None:
    """Load pages in headless Chromium and report the browser's timings per load.

    Each URL is loaded --loads times for each --connections value, each load in a fresh
    browser context (cold cache) unless --cache warm. HTTP/1.1 loads go through a proxy on
    loopback that opens at most N connections per host (Chromium has no such setting).
    A failed load is reported with the browser's reason; the exit status is 0 when the
    browser ran, whatever the loads did.

    Examples:
      cellperf web load http://10.0.0.1:8080/yahoo/ --connections 2 --loads 5
      cellperf web load URL1 URL2 --connections 2,4,6,8,10 --json \\
           --objects objects.parquet
    """
    from cellperf.web.browser import load_pages

    pages = [(_page_name(u), u) for u in args.urls]
    loads, session = load_pages(pages, connections=args.connections, http=args.http, cache=args.cache,
                                loads=args.loads, timeout_s=args.timeout, idle_s=args.idle,
                                trust_spki=args.trust_spki)
    inline = args.objects is not None and str(args.objects) == "-"
    if inline and not args.as_json:
        raise UserError("--objects -: puts the objects into the --json document; give --json too")
    if args.objects is not None and not inline:
        import polars as pl

        from cellperf.store import write_parquet

        rows = [o for ld in loads for o in ld.objects]
        write_parquet(pl.DataFrame(rows, infer_schema_length=None), args.objects)
    if args.as_json:
        objects = {"objects": [o for ld in loads for o in ld.objects]} if inline else {}
        print(json.dumps({**session, "loads": [ld.row for ld in loads], **objects}))
        return
    print(f"{session['browser']} started in {session['browser_start_s']:.2f} s")
    print(f"{'page':12} {'conn':>4} {'load':>4} {'status':6} {'load ms':>8} {'ttfb ms':>8} {'objects':>7} {'kB':>8} {'used':>4}")
    for ld in loads:
        r = ld.row
        if r["status"] != "ok":
            print(f"{r['page'][:12]:12} {r['connections']:4d} {r['load']:4d} failed: {r['reason']}"[:80])
            continue
        print(f"{r['page'][:12]:12} {r['connections']:4d} {r['load']:4d} {'ok':6} {r['load_ms']:8.0f} {r['ttfb_ms']:8.0f} "
              f"{r['objects']:7d} {r['bytes'] / 1000:8.1f} {r['connections_used'] or 0:4d}")


def _spki(text: str) -> str:
    import base64
    import binascii

    try:
        if len(base64.b64decode(text, validate=True)) == 32:
            return text
    except (binascii.Error, ValueError):
        pass
    raise argparse.ArgumentTypeError(f"'{text[:60]}' is not a base64 SHA-256 (44 characters ending in '=')")


def _page_name(url: str) -> str:
    """The page's name for tables: the last path segment of the URL that is not index.html."""
    from urllib.parse import urlparse

    parts = [p for p in urlparse(url).path.split("/") if p and p != "index.html"]
    return parts[-1] if parts else (urlparse(url).hostname or url)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from cellperf.web.server import HTTP_VERSIONS, Limits

    subcommands = add_subcommands(parser)
    p = add_subcommand(subcommands, "pages", pages_command)
    p.add_argument("folder", metavar="FOLDER", type=folder_path(Path), help="Where to write the pages.")
    p.add_argument("--json", dest="as_json", action="store_true", help="Print a summary as JSON.")

    p = add_subcommand(subcommands, "serve", serve_command)
    p.add_argument("folder", metavar="FOLDER", type=folder_path(Path), help="Page folder (index.html in it or its sub-folders).")
    p.add_argument("--listen", metavar="HOST:PORT", default="0.0.0.0:8080",
                   help="Address to serve on (port 0: any free), or fd:N, a listening socket inherited from the caller.")
    p.add_argument("--compression", choices=("on", "off"), default="off", help="gzip text objects.")
    p.add_argument("--http", choices=HTTP_VERSIONS, default="1.1", help="HTTP version (2: over TLS, self-signed).")
    p.add_argument("--json", dest="as_json", action="store_true", help="Print the URL as one JSON line when listening.")
    limits = Limits()
    p.add_argument("--max-connections", metavar="N", type=number_arg(lo=1, hi=65536, integer=True),
                   default=limits.max_connections, help="Most connections open at once (lowered to fit `ulimit -n`).")
    p.add_argument("--max-per-source", metavar="N", type=number_arg(lo=1, hi=65536, integer=True),
                   default=limits.max_per_source, help="Most connections open at once from one address.")
    p.add_argument("--header-timeout", metavar="SECONDS", type=number_arg(lo=0, lo_open=True, hi=3600, unit="seconds"),
                   default=limits.header_timeout_s, help="Longest a request's header may take to arrive.")
    p.add_argument("--idle-timeout", metavar="SECONDS", type=number_arg(lo=0, lo_open=True, hi=3600, unit="seconds"),
                   default=limits.idle_timeout_s, help="Longest a kept-alive connection may wait for its next request.")

    p = add_subcommand(subcommands, "load", load_command)
    p.add_argument("urls", metavar="URL", nargs="+", help="Pages to load (http:// or https://).")
    p.add_argument("--connections", metavar="N[,N...]", type=_connection_list, default=[6],
                   help="Most connections per host for HTTP/1.1 (1..32; a list loads each).")
    p.add_argument("--http", choices=HTTP_VERSIONS, default="1.1", help="HTTP version the server speaks.")
    p.add_argument("--cache", choices=("cold", "warm"), default="cold",
                   help="Browser cache before each load: cold (empty), or warm (the page loaded once before).")
    p.add_argument("--trust-spki", metavar="HASH", action="append", default=[], type=_spki,
                   help="Trust the HTTPS server whose certificate's public key has this SHA-256 (base64; "
                   "`cellperf web serve --http 2 --json` prints it): Chromium caches nothing that came with a "
                   "certificate error, so a warm cache over HTTPS needs it. Repeatable."),
    p.add_argument("--loads", metavar="N", type=number_arg(lo=1, hi=1000, integer=True), default=1,
                   help="Loads of each page per connection limit.")
    p.add_argument("--timeout", metavar="SECONDS", type=number_arg(lo=0, lo_open=True, hi=3600, unit="seconds"),
                   default=60.0, help="Longest a load may take before it counts as failed.")
    p.add_argument("--idle", metavar="SECONDS", type=number_arg(lo=0, hi=3600, unit="seconds"),
                   help="Load each page this long after a load of it that nothing followed (0: the radio "
                   "still connected; longer than its tail: promoted again; docs/methods.md §13).")
    p.add_argument("--objects", metavar="FILE", type=file_path(Path),
                   help="Write every load's objects here (Parquet), or with '-' into the --json document as "
                   "`objects` (the campaign runner's way: no Parquet writer to start in the browser's process).")
    p.add_argument("--json", dest="as_json", action="store_true", help="Print one JSON document.")


def run(args: argparse.Namespace) -> None:
    for url in getattr(args, "urls", []):
        if not url.startswith(("http://", "https://")):
            raise UserError(f"{url}: not an http:// or https:// URL")
    args.subcommand(args)
    sys.stdout.flush()
