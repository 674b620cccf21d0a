"""The path guard: reads confined to allowed roots and writes to the output folder, after resolving symlinks."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

class UnsafePath(ValueError):
    """A path outside the allowed roots (after resolving '..' and symlinks). Names the path and the roots."""


def _expand(text: str) -> Path:
    if "\x00" in text:
        raise UnsafePath(f"refused {text!r}: NUL byte in path")
    try:
        return Path(text).expanduser()
    except RuntimeError as exc:  # '~user' of an unknown user (or no home directory): refused, not a crash
        raise UnsafePath(f"refused {text!r}: cannot expand '~' ({exc})") from None


def _resolve(path: str | Path) -> Path:
    return _expand(str(path)).resolve(strict=False)


def safe_path(path: str | Path, roots: Iterable[str | Path] | None = None) -> Path:
    """The resolved path if it lies inside one of roots (default: the current directory), else UnsafePath."""
    root_list = [_resolve(r) for r in (roots or [])] or [Path.cwd().resolve()]
    p = _expand(str(path))
    if not p.is_absolute():
        p = Path.cwd() / p
    resolved = _resolve(p)
    for root in root_list:
        if resolved == root or resolved.is_relative_to(root):
            return resolved
    allowed = ", ".join(str(r) for r in root_list)
    raise UnsafePath(f"refused {str(path)!r}: resolves to {resolved}, outside the allowed roots [{allowed}]")


def safe_output_path(name: str | Path, out_dir: str | Path) -> Path:
    """out_dir/name resolved, refusing absolute names, '..' escapes and symlinks that leave out_dir."""
    text = str(name).strip()
    if not text or text in (".", ".."):
        raise UnsafePath(f"refused output name {str(name)!r}: expected a file name inside {out_dir}")
    if Path(text).is_absolute() or text.startswith("~"):
        raise UnsafePath(f"refused output name {text!r}: absolute paths are not allowed; expected a name inside {out_dir}")
    root = _resolve(out_dir)
    target = _resolve(root / text)
    if target == root or not target.is_relative_to(root):
        raise UnsafePath(f"refused output name {text!r}: resolves to {target}, outside the output folder {root}")
    return target
