"""The preview health probe (repeat_failure/turns/probe.py, seed ARD-0038 §3) against real HTTP servers on
127.0.0.1: each test starts a ThreadingHTTPServer on a free port and asserts the exact outcome,
reason, status, detail and the exact request paths each server saw."""

from __future__ import annotations

import datetime
import ipaddress
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from repeat_failure.turns import probe as probe_mod
from repeat_failure.turns.probe import (MAX_ASSETS, OUTCOME_REASONS, ProbeResult, probe,
                           validate_preview_url)
from tests.waiting import free_port

Route = Callable[[BaseHTTPRequestHandler], None]
TOKEN = "ghp_" + "A" * 36  # token-shaped, built here so no secret scanner flags this file


def respond(status: int = 200, body: str | bytes = b"",
            headers: dict[str, str] | None = None) -> Route:
    """A route answering ``status`` with ``body`` and a Content-Length."""
    data = body.encode() if isinstance(body, str) else body

    def route(h: BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        for name, value in (headers or {}).items():
            h.send_header(name, value)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
    return route


def redirect(location: str, status: int = 302) -> Route:
    return respond(status, b"", {"Location": location})


class Site:
    """A ThreadingHTTPServer on 127.0.0.1 (a free port chosen by the kernel) serving
    ``routes`` (request target → route; anything else answers 404) and recording the request
    targets and headers it saw. ``release`` frees handlers that wait or trickle."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.routes: dict[str, Route] = {}
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._seen: list[tuple[str, dict[str, str]]] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with site._lock:
                    site._seen.append((self.path, dict(self.headers)))
                route = site.routes.get(self.path, respond(404, b"not found"))
                try:
                    route(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the probe closed early (assets) or gave up (deadline)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.scheme = "http"
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
            self.scheme = "https"
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    def url(self, path: str = "/") -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}{path}"

    @property
    def origin(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def page(self, path: str, html: str, **headers: str) -> None:
        self.routes[path] = respond(200, html, {"Content-Type": "text/html; charset=utf-8",
                                                **headers})

    def ok(self, *paths: str) -> None:
        for path in paths:
            self.routes[path] = respond(200, "/* asset */",
                                        {"Content-Type": "text/javascript"})

    def paths(self) -> list[str]:
        with self._lock:
            return [path for path, _ in self._seen]

    def headers(self) -> list[dict[str, str]]:
        with self._lock:
            return [headers for _, headers in self._seen]

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)


@pytest.fixture
def make_site() -> Iterator[Callable[..., Site]]:
    sites: list[Site] = []

    def make(tls: ssl.SSLContext | None = None) -> Site:
        site = Site(tls)
        sites.append(site)
        return site
    yield make
    for site in sites:
        site.close()


@pytest.fixture
def site(make_site: Callable[..., Site]) -> Site:
    return make_site()


def as_tuple(r: ProbeResult) -> tuple[object, ...]:
    return r.outcome, r.reason, r.status, r.detail, r.assets_checked


def html(*tags: str) -> str:
    return ("<!doctype html><html><head><title>preview</title>" + "".join(tags)
            + "</head><body><div id=app></div></body></html>")


def ok_detail(page: str | int, checked: int, *more: str) -> str:
    size = page if isinstance(page, int) else len(page.encode())
    return "; ".join([f"entry 200 ({size} bytes)",
                      f"{checked} asset 2xx" if checked == 1 else f"{checked} assets 2xx",
                      *more])


# --- ok --------------------------------------------------------------------------------------

def test_good_page_with_script_stylesheet_and_modulepreload_is_ok(site: Site) -> None:
    page = html('<link rel="stylesheet" href="/assets/index.css">',
                '<link rel="modulepreload" href="/assets/vendor.js">',
                '<script type="module" src="/assets/index.js"></script>')
    site.page("/", page)
    site.ok("/assets/index.css", "/assets/vendor.js", "/assets/index.js")
    r = probe(site.url("/"))
    assert as_tuple(r) == ("ok", None, 200, ok_detail(page, 3), 3)
    assert site.paths() == ["/", "/assets/index.css", "/assets/vendor.js", "/assets/index.js"]
    first = site.headers()[0]
    assert first["Host"] == f"127.0.0.1:{site.port}"
    assert first["User-Agent"] == "repeat-failure-preview-probe/1"
    assert first["Connection"] == "close"
    assert 0 < r.elapsed_s < 5


def test_result_is_frozen_and_outcome_pairs_are_the_table(site: Site) -> None:
    site.page("/", html())
    r = probe(site.url("/"))
    with pytest.raises(AttributeError):
        r.outcome = "server_down"  # type: ignore[misc]
    assert OUTCOME_REASONS == (("ok", None), ("preview_error", "entry_status"),
                               ("preview_error", "entry_empty"),
                               ("preview_error", "asset_broken"),
                               ("server_down", "unreachable"), ("server_down", "timeout"))


def test_localhost_name_is_resolved(site: Site) -> None:
    page = html('<script src="/main.js"></script>')
    site.page("/", page)
    site.ok("/main.js")
    r = probe(f"http://localhost:{site.port}/")
    assert as_tuple(r) == ("ok", None, 200, ok_detail(page, 1), 1)
    assert site.paths() == ["/", "/main.js"]
    assert site.headers()[0]["Host"] == f"localhost:{site.port}"


def test_chunked_entry_is_read(site: Site) -> None:
    page = html('<script src="/main.js"></script>')

    def chunked(h: BaseHTTPRequestHandler) -> None:
        h.protocol_version = "HTTP/1.1"
        h.send_response(200)
        h.send_header("Transfer-Encoding", "chunked")
        h.send_header("Connection", "close")
        h.end_headers()
        data = page.encode()
        for i in range(0, len(data), 7):
            piece = data[i:i + 7]
            h.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        h.wfile.write(b"0\r\n\r\n")
    site.routes["/"] = chunked
    site.ok("/main.js")
    assert as_tuple(probe(site.url("/"))) == ("ok", None, 200, ok_detail(page, 1), 1)


def test_concurrent_probes_are_independent(site: Site) -> None:
    page = html('<script src="/main.js"></script>')
    site.page("/", page)
    site.ok("/main.js")
    results: list[ProbeResult] = []
    threads = [threading.Thread(target=lambda: results.append(probe(site.url("/"))))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert [as_tuple(r) for r in results] == [("ok", None, 200, ok_detail(page, 1), 1)] * 8
    assert sorted(site.paths()) == ["/"] * 8 + ["/main.js"] * 8


# --- entry problems --------------------------------------------------------------------------

def test_empty_body_is_entry_empty(site: Site) -> None:
    site.page("/", "")
    assert as_tuple(probe(site.url("/"))) == (
        "preview_error", "entry_empty", 200, "entry answered 200 with an empty body", 0)


def test_whitespace_only_body_is_entry_empty(site: Site) -> None:
    site.page("/", " \n\t \r\n")
    assert as_tuple(probe(site.url("/"))) == (
        "preview_error", "entry_empty", 200,
        "entry answered 200 with a whitespace-only body (6 bytes)", 0)


@pytest.mark.parametrize("status", [500, 404, 204, 401])
def test_entry_not_200_is_entry_status(site: Site, status: int) -> None:
    site.routes["/"] = respond(status, "<html>error page</html>")
    assert as_tuple(probe(site.url("/"))) == (
        "preview_error", "entry_status", status, f"entry answered {status}", 0)
    assert site.paths() == ["/"]


def test_same_origin_redirect_is_followed_then_ok(site: Site) -> None:
    page = html('<script src="main.js"></script>')
    site.routes["/"] = redirect("/app/")
    site.routes["/app/"] = redirect(site.url("/app/index.html"), 307)  # absolute, same origin
    site.page("/app/index.html", page)
    site.ok("/app/main.js")
    r = probe(site.url("/"))
    assert as_tuple(r) == ("ok", None, 200, ok_detail(page, 1), 1)
    # main.js resolves against the final URL, not the configured one
    assert site.paths() == ["/", "/app/", "/app/index.html", "/app/main.js"]


def test_redirect_to_a_404_names_where(site: Site) -> None:
    site.routes["/"] = redirect("/login")
    assert as_tuple(probe(site.url("/"))) == (
        "preview_error", "entry_status", 404, "entry answered 404 at /login after 1 redirect", 0)


def test_off_origin_redirect_is_not_followed(make_site: Callable[..., Site]) -> None:
    site, other = make_site(), make_site()
    other.page("/", html())
    site.routes["/"] = redirect(other.url("/"))
    assert as_tuple(probe(site.url("/"))) == (
        "preview_error", "entry_status", 302,
        f"entry redirected (302) to another origin, {other.origin}; not followed", 0)
    assert other.paths() == []


def test_redirect_to_another_scheme_is_off_origin(site: Site) -> None:
    site.routes["/"] = redirect(f"https://127.0.0.1:{site.port}/", 301)
    assert as_tuple(probe(site.url("/"))) == (
        "preview_error", "entry_status", 301,
        f"entry redirected (301) to another origin, https://127.0.0.1:{site.port}; not followed",
        0)
    assert site.paths() == ["/"]


def test_redirect_loop_stops_after_five(site: Site) -> None:
    site.routes["/loop"] = redirect("/loop")
    assert as_tuple(probe(site.url("/loop"))) == (
        "preview_error", "entry_status", 302,
        "entry redirected more than 5 times (302 at /loop after 5 redirects)", 0)
    assert site.paths() == ["/loop"] * 6


def test_redirect_without_location_is_entry_status(site: Site) -> None:
    site.routes["/"] = respond(302)
    assert as_tuple(probe(site.url("/"))) == (
        "preview_error", "entry_status", 302, "entry answered 302 without a Location header", 0)


# --- server down -----------------------------------------------------------------------------

def test_closed_port_is_unreachable() -> None:
    port = free_port()
    r = probe(f"http://127.0.0.1:{port}/")
    assert as_tuple(r) == ("server_down", "unreachable", None,
                           f"cannot get http://127.0.0.1:{port}: connection refused", 0)
    assert r.elapsed_s < 1


def test_connection_closed_without_response_is_unreachable(site: Site) -> None:
    site.routes["/"] = lambda h: None  # the handler returns: the server closes the connection
    assert as_tuple(probe(site.url("/"))) == (
        "server_down", "unreachable", None,
        f"cannot get {site.origin}: connection closed without a response", 0)


def test_slow_server_past_the_timeout_is_timeout(site: Site) -> None:
    def slow(h: BaseHTTPRequestHandler) -> None:
        site.release.wait(10)
        respond(200, html())(h)
    site.routes["/"] = slow
    r = probe(site.url("/"), timeout_s=0.5)
    assert as_tuple(r) == ("server_down", "timeout", None,
                           f"no response from {site.origin} within 0.5 s", 0)
    assert 0.5 <= r.elapsed_s < 1.5


def test_headers_trickled_byte_by_byte_are_bounded(site: Site) -> None:
    def trickle_head(h: BaseHTTPRequestHandler) -> None:
        h.wfile.write(b"HTTP/1.0 200 OK\r\nX-Slow: ")
        while not site.release.wait(0.01):
            h.wfile.write(b"a")
            h.wfile.flush()
    site.routes["/"] = trickle_head
    r = probe(site.url("/"), timeout_s=0.5)
    assert as_tuple(r) == ("server_down", "timeout", None,
                           f"no response from {site.origin} within 0.5 s", 0)
    assert 0.5 <= r.elapsed_s < 1.5


def test_body_trickled_forever_is_bounded_by_the_deadline(site: Site) -> None:
    def trickle_body(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "1000000")
        h.end_headers()
        h.wfile.write(b"<")
        while not site.release.wait(0.01):
            h.wfile.write(b"p")
            h.wfile.flush()
    site.routes["/"] = trickle_body
    r = probe(site.url("/"), timeout_s=0.5)
    assert (r.outcome, r.reason, r.status, r.assets_checked) == ("server_down", "timeout", 200, 0)
    m = re.fullmatch(r"entry body not complete within 0\.5 s \((\d+) bytes? read\)", r.detail)
    assert m is not None, r.detail
    assert 1 <= int(m[1]) <= 60  # about one byte per 10 ms
    assert 0.5 <= r.elapsed_s < 1.5


def test_resolver_failure_is_unreachable(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object, **kwargs: object) -> list[object]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    monkeypatch.setattr(socket, "getaddrinfo", fail)
    assert as_tuple(probe("http://preview.test:5173/")) == (
        "server_down", "unreachable", None, "cannot resolve host preview.test", 0)


def test_hanging_resolver_is_bounded_by_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    done = threading.Event()

    def hang(*args: object, **kwargs: object) -> list[object]:
        done.wait(10)
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
    monkeypatch.setattr(socket, "getaddrinfo", hang)
    try:
        r = probe("http://preview.test:5173/", timeout_s=0.5)
    finally:
        done.set()
    assert as_tuple(r) == ("server_down", "timeout", None,
                           "host preview.test not resolved within 0.5 s", 0)
    assert 0.5 <= r.elapsed_s < 1.5


# --- assets ----------------------------------------------------------------------------------

def test_script_404_is_asset_broken_naming_the_path(site: Site) -> None:
    site.page("/", html('<link rel="stylesheet" href="/style.css">',
                        '<script src="/missing.js"></script>', '<script src="/after.js"></script>'))
    site.ok("/style.css", "/after.js")
    assert as_tuple(probe(site.url("/"))) == (
        "preview_error", "asset_broken", 200, "asset /missing.js answered 404", 2)
    assert site.paths() == ["/", "/style.css", "/missing.js"]  # stops at the first broken


def test_stylesheet_500_is_asset_broken(site: Site) -> None:
    site.page("/", html('<link rel="stylesheet" href="/style.css?v=3">'))
    site.routes["/style.css?v=3"] = respond(500, "Internal Server Error")
    assert as_tuple(probe(site.url("/"))) == (
        "preview_error", "asset_broken", 200, "asset /style.css?v=3 answered 500", 1)


def test_an_asset_slower_than_the_deadline_is_a_timeout_not_a_broken_asset(site: Site) -> None:
    """A dev server still compiling a bundle is slow, not broken: server_down/timeout (no
    Event, no alert), naming the asset."""
    site.page("/", html('<script src="/fast.js"></script>', '<script src="/slow.js"></script>'))
    site.ok("/fast.js")

    def slow(h: BaseHTTPRequestHandler) -> None:
        site.release.wait(10)
        respond(200, "x")(h)
    site.routes["/slow.js"] = slow
    r = probe(site.url("/"), timeout_s=1.0)
    assert as_tuple(r) == ("server_down", "timeout", 200,
                           "asset /slow.js: no response within 1 s", 2)
    assert 1.0 <= r.elapsed_s < 2.0


def test_asset_connection_dropped_is_asset_broken(site: Site) -> None:
    site.page("/", html('<script src="/drop.js"></script>'))
    site.routes["/drop.js"] = lambda h: None
    assert as_tuple(probe(site.url("/"))) == (
        "preview_error", "asset_broken", 200,
        "asset /drop.js could not be fetched: connection closed without a response", 1)


def test_big_asset_is_not_downloaded(site: Site) -> None:
    page = html('<script src="/bundle.js"></script>')
    site.page("/", page)
    sent = [0]

    def huge(h: BaseHTTPRequestHandler) -> None:
        size = 512 * 1024 * 1024
        h.send_response(200)
        h.send_header("Content-Length", str(size))
        h.end_headers()
        block = b"x" * 65536
        while sent[0] < size and not site.release.is_set():
            h.wfile.write(block)
            sent[0] += len(block)
    site.routes["/bundle.js"] = huge
    r = probe(site.url("/"))
    assert as_tuple(r) == ("ok", None, 200, ok_detail(page, 1), 1)
    assert r.elapsed_s < 2
    time.sleep(0.2)
    assert sent[0] < 32 * 1024 * 1024  # what the socket buffers took, not 512 MiB


def test_same_origin_asset_redirect_is_followed(site: Site) -> None:
    page = html('<script src="/old.js"></script>')
    site.page("/", page)
    site.routes["/old.js"] = redirect("/new.js", 301)
    site.ok("/new.js")
    assert as_tuple(probe(site.url("/"))) == ("ok", None, 200, ok_detail(page, 1), 1)
    assert site.paths() == ["/", "/old.js", "/new.js"]


def test_asset_redirected_off_origin_is_skipped(make_site: Callable[..., Site]) -> None:
    site, other = make_site(), make_site()
    page = html('<script src="/cdn.js"></script>')
    site.page("/", page)
    site.routes["/cdn.js"] = redirect(other.url("/cdn.js"))
    assert as_tuple(probe(site.url("/"))) == (
        "ok", None, 200, ok_detail(page, 0, "1 cross-origin skipped"), 0)
    assert other.paths() == []


def test_relative_root_relative_and_base_href_resolution(site: Site) -> None:
    page = ('<html><head>'
            '<script src="early.js"></script>'      # before <base>: the document URL
            '<base href="/cdn/v2/">'                 # the first base with href wins
            '<base href="/ignored/">'
            '<script src="late.js"></script>'
            '<link rel="stylesheet" href="/root.css">'
            '<link rel="modulepreload" href="../up.js?x=1#frag">'
            '<script src=" \tdeep/\nmod.js \n"></script>'  # outer whitespace stripped, \n removed
            '<script src="sp ace.js"></script>'        # percent-encoded like a browser
            '</head><body></body></html>')
    site.page("/app/index.html", page)
    site.ok("/app/early.js", "/cdn/v2/late.js", "/root.css", "/cdn/up.js?x=1",
            "/cdn/v2/deep/mod.js", "/cdn/v2/sp%20ace.js")
    assert as_tuple(probe(site.url("/app/index.html"))) == ("ok", None, 200, ok_detail(page, 6), 6)
    assert site.paths() == ["/app/index.html", "/app/early.js", "/cdn/v2/late.js", "/root.css",
                            "/cdn/up.js?x=1", "/cdn/v2/deep/mod.js", "/cdn/v2/sp%20ace.js"]


def test_base_href_to_another_origin_makes_relative_assets_cross_origin(
        make_site: Callable[..., Site]) -> None:
    site, other = make_site(), make_site()
    page = html(f'<base href="{other.url("/static/")}">', '<script src="main.js"></script>')
    site.page("/", page)
    assert as_tuple(probe(site.url("/"))) == (
        "ok", None, 200, ok_detail(page, 0, "1 cross-origin skipped"), 0)
    assert other.paths() == []


def test_cross_origin_assets_are_skipped_never_fetched(make_site: Callable[..., Site]) -> None:
    site, other = make_site(), make_site()
    page = html(f'<script src="{other.url("/x.js")}"></script>',
                f'<script src="//127.0.0.1:{other.port}/y.js"></script>',
                f'<link rel="stylesheet" href="http://localhost:{site.port}/z.css">',  # other host
                f'<script src="https://127.0.0.1:{site.port}/s.js"></script>',  # other scheme
                '<script src="/ok.js"></script>')
    site.page("/", page)
    site.ok("/ok.js")
    assert as_tuple(probe(site.url("/"))) == (
        "ok", None, 200, ok_detail(page, 1, "4 cross-origin skipped"), 1)
    assert other.paths() == []
    assert site.paths() == ["/", "/ok.js"]


def test_data_blob_javascript_urls_are_skipped(site: Site) -> None:
    page = html('<script src="data:text/javascript,console.log(1)"></script>',
                '<link rel="stylesheet" href="data:text/css,body{}">',
                '<script src="blob:http://127.0.0.1/0f3c"></script>',
                '<script src="javascript:void(0)"></script>',
                '<link rel="modulepreload" href="ftp://files.example/x.js">',
                '<script src=""></script>')  # an empty src is never fetched, not counted
    site.page("/", page)
    assert as_tuple(probe(site.url("/"))) == (
        "ok", None, 200, ok_detail(page, 0, "5 not http(s) skipped"), 0)
    assert site.paths() == ["/"]


def test_rel_tokens_are_case_insensitive_and_only_stylesheet_or_modulepreload_count(
        site: Site) -> None:
    page = html('<LINK REL="StyleSheet" HREF="/a.css">',
                '<link rel="preload stylesheet" href="/b.css">',
                '<link rel="\tMODULEPRELOAD\n" href="/c.js">',
                '<link rel="preload" as="style" href="/not-preload.css">',
                '<link rel="icon" href="/not-icon.ico">',
                '<link rel="stylesheetx" href="/not-x.css">',
                '<link href="/not-norel.css">',
                '<link rel="stylesheet">')
    site.page("/", page)
    site.ok("/a.css", "/b.css", "/c.js")
    assert as_tuple(probe(site.url("/"))) == ("ok", None, 200, ok_detail(page, 3), 3)
    assert site.paths() == ["/", "/a.css", "/b.css", "/c.js"]


def test_duplicate_assets_are_fetched_once(site: Site) -> None:
    page = html('<link rel="modulepreload" href="/app.js">', '<script src="/app.js"></script>',
                '<script src="app.js"></script>', '<script src="./app.js"></script>',
                '<script src="/app.js#again"></script>', '<script src="/x/../app.js"></script>',
                f'<script src="{site.url("/app.js")}"></script>')
    site.page("/", page)
    site.ok("/app.js")
    assert as_tuple(probe(site.url("/"))) == ("ok", None, 200, ok_detail(page, 1), 1)
    assert site.paths() == ["/", "/app.js"]


def test_more_than_64_assets_are_capped(site: Site) -> None:
    names = [f"/chunk-{i}.js" for i in range(70)]
    page = html(*(f'<script src="{name}"></script>' for name in names))
    site.page("/", page)
    site.ok(*names)
    assert MAX_ASSETS == 64
    assert as_tuple(probe(site.url("/"))) == (
        "ok", None, 200, ok_detail(page, 64, "checked the first 64 of 70 same-origin assets"), 64)
    assert site.paths() == ["/", *names[:64]]


def test_entry_over_2_mib_is_parsed_as_far_as_read(site: Site) -> None:
    page = ('<script src="/early.js"></script>' + " " * (3 * 1024 * 1024)
            + '<script src="/late.js"></script>')
    site.page("/", page)
    site.ok("/early.js", "/late.js")
    assert as_tuple(probe(site.url("/"))) == (
        "ok", None, 200, ok_detail(2 * 1024 * 1024, 1, "entry read to the 2 MiB limit"), 1)
    assert site.paths() == ["/", "/early.js"]


def test_broken_markup_is_still_parsed(site: Site) -> None:
    page = ('<!DOCTYPE html><html><head>\n'
            '<script src=/a.js></script>\n'
            '<![foo bar]>\n'                           # html.parser asserts on this by itself
            '<div><p>unclosed <b>bold</i></p></p></span>\n'
            '<link rel=stylesheet href=/b.css>\n'
            '<p <b>x &notanentity; &#99999999;\n'
            "<link rel=modulepreload href='/c.js'/>\n"
            '<script src="/d.js" src="/ignored.js">\n')  # first attribute wins; never closed
    site.page("/", page)
    site.ok("/a.js", "/b.css", "/c.js", "/d.js")
    assert as_tuple(probe(site.url("/"))) == ("ok", None, 200, ok_detail(page, 4), 4)
    assert site.paths() == ["/", "/a.js", "/b.css", "/c.js", "/d.js"]


def test_entry_charset_is_used_and_non_ascii_paths_are_utf8_encoded(site: Site) -> None:
    page = html('<script src="/caf\u00e9.js"></script>')
    site.routes["/"] = respond(200, page.encode("latin-1"),
                               {"Content-Type": "text/html; charset=ISO-8859-1"})
    site.ok("/caf%C3%A9.js")
    assert as_tuple(probe(site.url("/"))) == ("ok", None, 200, ok_detail(len(page), 1), 1)
    assert site.paths() == ["/", "/caf%C3%A9.js"]


@pytest.mark.parametrize("charset", ["idna", "rot13", "no-such-codec"])
def test_unusable_charset_falls_back_to_utf8(site: Site, charset: str) -> None:
    page = html('<script src="/main.js"></script>', "x" * 100)
    site.routes["/"] = respond(200, page, {"Content-Type": f"text/html; charset={charset}"})
    site.ok("/main.js")
    assert as_tuple(probe(site.url("/"))) == ("ok", None, 200, ok_detail(page, 1), 1)


def test_inert_and_scripted_text_is_not_an_asset(site: Site) -> None:
    page = html('<script>document.write("<script src=/in-script.js></scr" + "ipt>")</script>',
                '<!-- <script src="/in-comment.js"></script> -->',
                '<template><script src="/in-template.js"></script></template>',
                '<noscript><link rel="stylesheet" href="/in-noscript.css"></noscript>',
                '<script src="/real.js"></script>')
    site.page("/", page)
    site.ok("/real.js")
    assert as_tuple(probe(site.url("/"))) == ("ok", None, 200, ok_detail(page, 1), 1)
    assert site.paths() == ["/", "/real.js"]


def test_token_in_an_asset_path_never_reaches_detail(site: Site) -> None:
    site.page("/", html(f'<script src="/static/{TOKEN}/app.js"></script>'))
    r = probe(site.url("/"))
    assert as_tuple(r) == ("preview_error", "asset_broken", 200,
                           "asset /static/[REDACTED]/app.js answered 404", 1)
    assert TOKEN not in r.detail and TOKEN[:12] not in r.detail


def test_token_in_a_redirect_target_never_reaches_detail(site: Site) -> None:
    site.routes["/"] = redirect(f"/login?token={TOKEN}")
    r = probe(site.url("/"))
    assert as_tuple(r) == ("preview_error", "entry_status", 404,
                           "entry answered 404 at /login?token=[REDACTED] after 1 redirect", 0)
    assert TOKEN not in r.detail


def test_long_asset_path_is_shortened_in_detail(site: Site) -> None:
    path = "/" + "a" * 300 + ".js"
    site.page("/", html(f'<script src="{path}"></script>'))
    r = probe(site.url("/"))
    assert as_tuple(r) == ("preview_error", "asset_broken", 200,
                           f"asset {path[:157]}... answered 404", 1)


# --- https -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tls_server_context(tmp_path_factory: pytest.TempPathFactory) -> ssl.SSLContext:
    """A server context with a self-signed certificate for 127.0.0.1."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    folder: Path = tmp_path_factory.mktemp("tls")
    (folder / "cert.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "key.pem").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(folder / "cert.pem", folder / "key.pem")
    return ctx


def test_https_without_verification_checks_assets(make_site: Callable[..., Site],
                                                  tls_server_context: ssl.SSLContext) -> None:
    site = make_site(tls_server_context)
    page = html('<script src="/main.js"></script>')
    site.page("/", page)
    site.ok("/main.js")
    assert as_tuple(probe(site.url("/"), verify=False)) == ("ok", None, 200,
                                                            ok_detail(page, 1), 1)
    assert site.paths() == ["/", "/main.js"]


def test_https_verifies_certificates_by_default(make_site: Callable[..., Site],
                                                tls_server_context: ssl.SSLContext) -> None:
    site = make_site(tls_server_context)
    site.page("/", html())
    assert as_tuple(probe(site.url("/"))) == (
        "server_down", "unreachable", None,
        f"cannot get {site.origin}: TLS certificate verification failed", 0)
    assert site.paths() == []


def test_https_body_trickle_is_bounded(make_site: Callable[..., Site],
                                       tls_server_context: ssl.SSLContext) -> None:
    site = make_site(tls_server_context)

    def trickle_body(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "1000000")
        h.end_headers()
        while not site.release.wait(0.01):
            h.wfile.write(b"p")
            h.wfile.flush()
    site.routes["/"] = trickle_body
    r = probe(site.url("/"), timeout_s=0.5, verify=False)
    assert (r.outcome, r.reason, r.status) == ("server_down", "timeout", 200)
    assert 0.5 <= r.elapsed_s < 1.5


# --- validation ------------------------------------------------------------------------------

@pytest.mark.parametrize("url", ["http://127.0.0.1:5173/", "https://preview.example.test/app?x=1",
                                 "http://[::1]:8080/", "HTTP://Localhost", "http://host:/"])
def test_valid_preview_urls_are_returned_unchanged(url: str) -> None:
    assert validate_preview_url(url) == url


@pytest.mark.parametrize(("url", "message"), [
    ("ftp://files.example/", "preview URL must be http:// or https:// (scheme 'ftp')"),
    ("localhost:5173", "preview URL must be http:// or https:// (scheme 'localhost')"),
    ("/index.html", "preview URL must be http:// or https:// (no scheme)"),
    ("x" * 5000 + "://a/", f"preview URL must be http:// or https:// (scheme '{'x' * 29}...')"),
    ("http:///index.html", "preview URL has no host"),
    ("http://user:hunter2@preview.test/", "preview URL must not contain credentials "
     "(user:password@host); credentials do not belong in the configuration"),
    ("http://user@preview.test/", "preview URL must not contain credentials "
     "(user:password@host); credentials do not belong in the configuration"),
    ("http://preview.test/#access_token=abc", "preview URL must not have a fragment (#...): it "
     "is never sent to the server"),
    ("http://preview.test/#", "preview URL must not have a fragment (#...): it is never sent "
     "to the server"),
    ("http://preview.test:99999/", "preview URL has a bad port (must be a number in 1..65535)"),
    ("http://preview.test:0/", "preview URL has a bad port (must be a number in 1..65535)"),
    ("http://preview.test:web/", "preview URL has a bad port (must be a number in 1..65535)"),
    ("http://preview test/", "preview URL contains whitespace or control characters"),
    ("http://preview.test/\n", "preview URL contains whitespace or control characters"),
    ("", "preview URL is empty"),
    ("http://preview..test/", "preview URL has an invalid host name"),
    ("http://[::1/", "preview URL cannot be parsed: Invalid IPv6 URL"),
])
def test_invalid_preview_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        validate_preview_url(url)
    assert str(err.value) == message
    assert "hunter2" not in str(err.value) and "access_token" not in str(err.value)


def test_non_string_url_is_refused() -> None:
    with pytest.raises(ValueError, match=r"^preview URL must be a string, not int$"):
        validate_preview_url(5173)  # type: ignore[arg-type]


def test_probe_refuses_bad_url_and_timeout() -> None:
    with pytest.raises(ValueError, match=r"^preview URL has no host$"):
        probe("http:///")
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"^timeout_s must be a finite number"):
            probe("http://127.0.0.1:1/", timeout_s=bad)


def test_module_docstrings_name_the_seed() -> None:
    for obj in (probe_mod, probe_mod.probe, probe_mod.ProbeResult,
                probe_mod.validate_preview_url):
        assert obj.__doc__ and "ARD-0038" in obj.__doc__.replace("ard-0038", "ARD-0038")
