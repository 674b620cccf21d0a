"""Hostile content stops here: prompt-injection scanning, SSRF-safe URL fetching, confined file paths.

- `scan_text` flags and neutralises prompt-injection patterns in search results, fetched pages, files and step
  outputs before any of it reaches a prompt; `flag_record` is what the run record keeps of a flagged text.
- `DataMarker` marks the untrusted text that does reach a prompt as data (spotlighting), with a boundary the
  text cannot forge; `unsourced_urls` lists URLs in a final answer that no gathered source has.
- `check_url` / `fetch_url` refuse non-http(s) schemes and any host that resolves to a loopback, private,
  link-local, multicast, reserved or cloud-metadata address (IPv4-mapped IPv6 and decimal/hex/octal IPv4
  forms included). Every redirect hop is checked again, and the connection goes to the address that was
  checked, so DNS rebinding between check and connect does not help an attacker.
- `safe_path` / `safe_output_path` confine reads to allowed roots and writes to the output folder, after
  resolving symlinks.

- _scanner: `scan_text`, `ScanResult`, `INJECTION_PATTERNS`, `REMOVED`, `flag_record`.
- _marker: `DataMarker`.
- _output: `unsourced_urls`.
- _urls: `check_url`, `ip_refusal`, `fetch_url`, `RawResponse`, `html_to_text`, `UnsafeURL`, `FetchError`.
- _paths: `safe_path`, `safe_output_path`, `UnsafePath`.
"""

from ._marker import DataMarker
from ._output import unsourced_urls
from ._paths import UnsafePath, safe_output_path, safe_path
from ._scanner import ScanResult, flag_record, scan_text
from ._urls import FetchError, UnsafeURL, fetch_url, html_to_text

__all__ = [
    "ScanResult",
    "scan_text",
    "flag_record",
    "DataMarker",
    "unsourced_urls",
    "UnsafeURL",
    "FetchError",
    "UnsafePath",
    "fetch_url",
    "html_to_text",
    "safe_path",
    "safe_output_path",
]
