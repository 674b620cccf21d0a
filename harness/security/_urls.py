"""The URL guard and fetcher: SSRF-safe http(s) fetching, every redirect hop checked, pages turned into text.

`check_url` / `fetch_url` refuse non-http(s) schemes and any host that resolves to a loopback, private,
link-local, multicast, reserved or cloud-metadata address (IPv4-mapped IPv6 and decimal/hex/octal IPv4 forms
included). Every redirect hop is checked again, and the connection goes to the address that was checked, so DNS
rebinding between check and connect does not help an attacker.
"""

from __future__ import annotations

import http.client
import ipaddress
import re
import socket
import ssl
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Callable, Mapping, Sequence
from urllib.parse import urljoin, urlsplit

from ._scanner import _COMMENT_CUES

class UnsafeURL(ValueError):
    """A URL refused by policy: scheme, host name or resolved address. The message says which rule."""


class FetchError(RuntimeError):
    """A permitted URL could not be fetched (DNS, connection, HTTP status, content type)."""


_METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata", "metadata.goog", "instance-data"})
_METADATA_IPS = frozenset({ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")})
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
Resolver = Callable[[str, int], Sequence[str]]


def ip_refusal(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """Why this address may not be fetched, or None if it is a public address."""
    if isinstance(ip, ipaddress.IPv6Address):
        mapped = ip.ipv4_mapped or ip.sixtofour
        if mapped is not None:
            reason = ip_refusal(mapped)
            return f"{reason} (IPv4 embedded in {ip})" if reason else None
    if ip in _METADATA_IPS:
        return "cloud metadata address"
    for attr, label in (
        ("is_loopback", "loopback"),
        ("is_unspecified", "unspecified"),
        ("is_link_local", "link-local"),
        ("is_multicast", "multicast"),
        ("is_reserved", "reserved"),
        ("is_private", "private"),
    ):
        if getattr(ip, attr):
            return f"{label} address"
    if isinstance(ip, ipaddress.IPv4Address) and ip in _CGNAT:
        return "shared (carrier-grade NAT) address"
    if not ip.is_global:
        return "non-global address"
    return None


def _literal_ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if re.fullmatch(r"[0-9a-fA-FxX.]+", host) and re.search(r"\d", host):
        try:  # inet_aton accepts 2130706433, 0x7f000001, 0177.0.0.1 and 127.1, as do most HTTP clients
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def _default_resolver(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise FetchError(f"cannot resolve host {host!r}: {exc}") from exc
    return [info[4][0] for info in infos]


def _checked(url: str, resolver: Resolver | None) -> tuple[str, str, int, str, str]:
    """(scheme, host, port, path_with_query, ip) after every policy check."""
    if not isinstance(url, str) or not url.strip():
        raise UnsafeURL(f"expected an http(s) URL, got {url!r}")
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise UnsafeURL(f"malformed URL {url!r}: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise UnsafeURL(f"refused {url!r}: scheme {scheme or '(none)'!r} is not allowed; expected http or https")
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        raise UnsafeURL(f"refused {url!r}: no host")
    if host == "localhost" or host.endswith(".localhost"):
        raise UnsafeURL(f"refused {url!r}: host {host!r} is loopback")
    if host in _METADATA_HOSTS or host.endswith(".internal"):
        raise UnsafeURL(f"refused {url!r}: host {host!r} is a cloud metadata / internal name")
    port = port or (443 if scheme == "https" else 80)
    literal = _literal_ip(host)
    addresses = [str(literal)] if literal is not None else list((resolver or _default_resolver)(host, port))
    if not addresses:
        raise FetchError(f"cannot resolve host {host!r}: no addresses")
    for addr in addresses:
        try:
            ip = ipaddress.ip_address(addr.split("%", 1)[0])
        except ValueError as exc:
            raise UnsafeURL(f"refused {url!r}: resolver returned a non-address {addr!r}") from exc
        reason = ip_refusal(ip)
        if reason:
            raise UnsafeURL(f"refused {url!r}: {host} resolves to {ip}, a {reason}")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return scheme, host, port, path, addresses[0]


def check_url(url: str, *, resolver: Resolver | None = None) -> str:
    """Return url if it may be fetched; raise UnsafeURL naming the rule that refused it.

    resolver(host, port) -> addresses defaults to socket.getaddrinfo; tests inject one.
    """
    _checked(url, resolver)
    return url.strip()


@dataclass(frozen=True)
class RawResponse:
    status: int
    headers: Mapping[str, str]
    body: bytes
    truncated: bool = False


Transport = Callable[[str, str, int, str, str, float, int], RawResponse]

_ALLOWED_TYPES = ("text/", "application/xhtml+xml", "application/xml", "application/json", "application/pdf")


def _http_transport(scheme: str, host: str, port: int, path: str, ip: str, timeout: float, max_bytes: int) -> RawResponse:
    """GET path from the already-checked ip, with Host/SNI/certificate checks against host."""
    if scheme == "https":
        ctx = ssl.create_default_context()

        class _Pinned(http.client.HTTPSConnection):
            def connect(self) -> None:
                sock = socket.create_connection((ip, port), timeout)
                self.sock = ctx.wrap_socket(sock, server_hostname=host)

        conn: http.client.HTTPConnection = _Pinned(host, port, timeout=timeout, context=ctx)
    else:

        class _PinnedHTTP(http.client.HTTPConnection):
            def connect(self) -> None:
                self.sock = socket.create_connection((ip, port), timeout)

        conn = _PinnedHTTP(host, port, timeout=timeout)
    try:
        conn.request(
            "GET",
            path,
            headers={
                "Host": host if port in (80, 443) else f"{host}:{port}",
                "User-Agent": "autoresearch-harness/0.1 (+research context fetch)",
                "Accept": "text/html,text/plain,application/xhtml+xml;q=0.9,*/*;q=0.5",
                "Accept-Encoding": "identity",
            },
        )
        resp = conn.getresponse()
        body = resp.read(max_bytes + 1) if resp.status < 300 or resp.status >= 400 else b""
        headers = {k.lower(): v for k, v in resp.getheaders()}
        return RawResponse(resp.status, headers, body[:max_bytes], len(body) > max_bytes)
    except (OSError, http.client.HTTPException) as exc:
        raise FetchError(f"GET {scheme}://{host}:{port}{path} failed: {type(exc).__name__}: {exc}") from exc
    finally:
        conn.close()


def fetch_url(
    url: str,
    timeout: float = 10.0,
    max_bytes: int = 2_000_000,
    *,
    resolver: Resolver | None = None,
    transport: Transport | None = None,
    max_redirects: int = 5,
) -> str:
    """Fetch an http(s) page as plain text, checking the URL and every redirect hop against the SSRF policy.

    At most max_bytes of body are read; HTML becomes text (MarkItDown, else a simple parser); only text-like
    content types (and PDF) are accepted. Raises UnsafeURL on a refused hop, FetchError on other failures.
    """
    send = transport or _http_transport
    current = url
    for _hop in range(max_redirects + 1):
        scheme, host, port, path, ip = _checked(current, resolver)
        resp = send(scheme, host, port, path, ip, timeout, max_bytes)
        if resp.status in (301, 302, 303, 307, 308):
            location = resp.headers.get("location")
            if not location:
                raise FetchError(f"{current}: redirect {resp.status} without a Location header")
            current = urljoin(current, location.strip())
            continue
        if resp.status >= 400:
            raise FetchError(f"{current}: HTTP {resp.status}")
        ctype = resp.headers.get("content-type", "text/html").split(";")[0].strip().lower()
        if not ctype.startswith(_ALLOWED_TYPES):
            raise FetchError(f"{current}: content type {ctype!r} refused; expected text/html, text/plain, xml, json or pdf")
        return _body_text(resp.body, ctype, resp.headers.get("content-type", ""))
    raise FetchError(f"{url}: more than {max_redirects} redirects")


def _body_text(body: bytes, ctype: str, header: str) -> str:
    if ctype == "application/pdf":
        return _markitdown_bytes(body, ".pdf") or ""
    m = re.search(r"charset=([\w.-]+)", header, re.IGNORECASE)
    try:
        text = body.decode(m.group(1) if m else "utf-8", errors="replace")
    except LookupError:
        text = body.decode("utf-8", errors="replace")
    if ctype in ("text/html", "application/xhtml+xml") or re.match(r"\s*<(?:!doctype|html)", text, re.IGNORECASE):
        return html_to_text(text)
    return text


def _markitdown_bytes(body: bytes, suffix: str) -> str | None:
    try:
        import io

        from markitdown import MarkItDown, StreamInfo

        return MarkItDown().convert_stream(io.BytesIO(body), stream_info=StreamInfo(extension=suffix)).text_content
    except Exception:  # optional converters missing or corrupt input: caller falls back
        return None


def _markitdown_html(html: str) -> str | None:
    try:
        from markitdown.converters import HtmlConverter

        return HtmlConverter().convert_string(html).markdown
    except Exception:  # markitdown missing or its parser choked: caller falls back to the simple parser
        return None


class _TextParser(HTMLParser):
    _SKIP = frozenset({"script", "style", "noscript", "template", "svg", "head"})
    _BLOCK = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "section", "article"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in self._SKIP:
            self._skip += 1
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP and self._skip:
            self._skip -= 1
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def html_to_text(html: str) -> str:
    """HTML as readable text: MarkItDown's markdown when it works, else a tag-stripping parser.

    HTML comments are kept visible to scan_text (they are a common place to hide instructions).
    """
    comments = " ".join(f"<!--{c}-->" for c in re.findall(r"<!--(.*?)-->", html, re.DOTALL) if _COMMENT_CUES.search(c))
    text = _markitdown_html(html)
    if not text:
        parser = _TextParser()
        try:
            parser.feed(html)
            parser.close()
        except Exception:  # HTMLParser is lenient; anything else means give back raw text stripped of tags
            return re.sub(r"<[^>]+>", " ", html)
        text = "".join(parser.parts)
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r"\n\s*\n+", "\n\n", text).strip()
    return f"{text}\n{comments}" if comments else text
