"""The preview probe's URLs (:mod:`repeat_failure.turns.probe`): the check of a configured preview
URL (:func:`validate_preview_url`), an URL's origin (:class:`Origin`, :func:`origin_of`) and
request target (:func:`request_target`), and the entry assets an HTML document references
(:func:`parse_assets`), resolved the way a browser resolves them (WHATWG URL standard, HTML
``<base href>``). Pure functions of their arguments: no I/O.
"""

from __future__ import annotations

from html.parser import HTMLParser
from typing import NamedTuple
from urllib.parse import SplitResult, quote, urljoin, urlsplit

#: The port of each scheme a probe speaks when the URL names none.
DEFAULT_PORTS = {"http": 80, "https": 443}
#: Characters left as they are when a path or query is percent-encoded the way a browser's URL
#: parser does: printable ASCII except space, ``"``, ``<``, ``>``, `````, ``{``, ``}``; an
#: existing ``%XX`` stays (``%`` is safe), non-ASCII becomes UTF-8 ``%XX``.
_URL_SAFE = "!#$%&'()*+,-./:;=?@[\\]^_|~"
_ASCII_WS = " \t\n\r\f"


class Origin(NamedTuple):
    """An http(s) URL's origin: scheme (lower case), host, port (the default port filled in)."""

    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


def validate_preview_url(url: str) -> str:
    """Check a preview origin URL from the configuration and return it unchanged.

    Accepted: an absolute ``http://`` or ``https://`` URL with a host (name or IP literal), an
    optional port in 1..65535, path and query. Raises :class:`ValueError` with a message naming
    the problem (never echoing a credential or the fragment) when ``url`` is not a string or is
    empty, holds whitespace or control characters, cannot be parsed, has another scheme, has
    userinfo (``user:password@``; credentials must not be in the config), has no host or a bad
    port, or has a fragment (``#...``; a fragment is never sent to the server). Seed ARD-0038 §3
    (the probe surface is the preview origin).
    """
    if not isinstance(url, str):
        raise ValueError(f"preview URL must be a string, not {type(url).__name__}")
    if not url:
        raise ValueError("preview URL is empty")
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise ValueError("preview URL contains whitespace or control characters")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ValueError(f"preview URL cannot be parsed: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        scheme_text = parts.scheme if len(parts.scheme) <= 32 else parts.scheme[:29] + "..."
        shown = f"scheme {scheme_text!r}" if parts.scheme else "no scheme"
        raise ValueError(f"preview URL must be http:// or https:// ({shown})")
    if "@" in parts.netloc:
        raise ValueError("preview URL must not contain credentials (user:password@host); "
                         "credentials do not belong in the configuration")
    if not parts.hostname:
        raise ValueError("preview URL has no host")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise ValueError("preview URL has a bad port (must be a number in 1..65535)")
    try:
        parts.hostname.encode("idna")
    except UnicodeError:
        raise ValueError("preview URL has an invalid host name") from None
    if "#" in url:
        raise ValueError("preview URL must not have a fragment (#...): it is never sent to "
                         "the server")
    return url


def origin_of(parts: SplitResult) -> Origin | None:
    """(scheme, host, port) of an http(s) URL, default port filled in; ``None`` otherwise."""
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    return Origin(scheme, parts.hostname, port or DEFAULT_PORTS[scheme])


def request_target(parts: SplitResult) -> str:
    """The request target (path and query, percent-encoded like a browser does)."""
    target = quote(parts.path or "/", safe=_URL_SAFE)
    if parts.query:
        target += "?" + quote(parts.query, safe=_URL_SAFE)
    return target


# --- the entry document's assets ---------------------------------------------------------------

def clean_ref(value: str | None) -> str:
    """An attribute value as a browser's URL parser takes it: leading/trailing ASCII whitespace
    stripped, tabs and newlines removed."""
    if value is None:
        return ""
    return value.strip(_ASCII_WS).replace("\t", "").replace("\n", "").replace("\r", "")


class _AssetParser(HTMLParser):
    """Collects the entry assets of one document in tree order, each resolved to an absolute
    URL string against the base URL in effect where it appears (the document URL until the
    first ``<base href>``, whose frozen URL then applies; a later base is ignored, as is a base
    whose URL is ``data:``/``javascript:`` or unparsable). Elements inside ``<template>`` and
    ``<noscript>`` (raw text for a browser with scripting) are inert and not collected."""

    _INERT = ("template", "noscript")

    def __init__(self, document_url: str) -> None:
        super().__init__(convert_charrefs=True)
        self._document_url = document_url
        self._base: str | None = None
        self._inert = 0
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._INERT:
            self._inert += 1
            return
        if self._inert:
            return
        first: dict[str, str | None] = {}
        for name, value in attrs:  # a repeated attribute: the first one counts
            first.setdefault(name, value)
        if tag == "base" and "href" in first and self._base is None:
            self._base = self._freeze_base(clean_ref(first["href"]))
        elif tag == "script" and "src" in first:
            self._add(first["src"])
        elif tag == "link" and "href" in first:
            rel = (first.get("rel") or "").lower().split()
            if "stylesheet" in rel or "modulepreload" in rel:
                self._add(first["href"])

    def handle_endtag(self, tag: str) -> None:
        if tag in self._INERT and self._inert:
            self._inert -= 1

    def parse_marked_section(self, i: int, report: int = 1) -> int:
        # html.parser raises AssertionError on "<![foo" ; the HTML standard reads it as a bogus
        # comment running to the next ">".
        try:
            return super().parse_marked_section(i, report)  # type: ignore[arg-type]
        except AssertionError:
            end = self.rawdata.find(">", i + 3)
            return -1 if end < 0 else end + 1

    def _freeze_base(self, href: str) -> str:
        try:
            frozen = urljoin(self._document_url, resolve_backslashes(href))
            scheme = urlsplit(frozen).scheme.lower()
        except ValueError:
            return self._document_url
        return self._document_url if scheme in ("data", "javascript") else frozen

    def _add(self, value: str | None) -> None:
        ref = clean_ref(value)
        if not ref:  # an empty src/href is never fetched
            return
        try:
            self.refs.append(urljoin(self._base or self._document_url, resolve_backslashes(ref)))
        except ValueError:
            self.refs.append(ref)  # unparsable: classified as not fetchable


def resolve_backslashes(ref: str) -> str:
    """``\\`` before the query reads as ``/`` in http(s) URLs (WHATWG URL standard)."""
    head, sep, tail = ref.partition("?")
    return head.replace("\\", "/") + sep + tail


def parse_assets(text: str, document_url: str) -> list[str]:
    """The entry assets' absolute URLs in document order (duplicates kept)."""
    parser = _AssetParser(document_url)
    try:
        parser.feed(text)
        parser.close()
    except AssertionError:  # a corner of html.parser we do not know of: keep what was found
        pass
    return parser.refs
