"""The Prompt Registry's read side: `synth.source=prompts:/...` -> the registered instructions. Where the MLflow
tracking store (and so the registry) is, its URI, SQLite file, lock and WAL, is harness.stores'. The write side
(registering and promoting) is the sweep's: experiments.sweep."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Mapping

from harness.config import TASK_TYPES, ConfigError, SynthConfig
from harness.stores import enable_wal, sqlite_db, sqlite_file, store_lock


CHAMPION, PREVIOUS = "champion", "previous"


PREFIX_RULE = re.compile(r"^[A-Za-z0-9_.-]+$")  # MLflow's prompt-name rule


_URI = re.compile(r"^prompts:/([A-Za-z0-9_.-]+)(?:@([A-Za-z0-9_.-]+)|/(\d+))$")


_TYPED = re.compile(rf"^(.+)-synth-({'|'.join(TASK_TYPES)})$")


def prompt_name(prefix: str, task_type: str) -> str:
    return f"{prefix}-synth-{task_type}"


@dataclass(frozen=True)
class Source:
    """A parsed synth.source: one prompt (task_type set) or every task type under a prefix (task_type None)."""

    uri: str
    name: str  # the prompt's name, or the prefix
    task_type: str | None
    alias: str | None = None
    version: int | None = None


def parse_source(uri: str) -> Source:
    m = _URI.match(uri.strip())
    if m is None:
        raise ConfigError(f"synth.source={uri!r} is not a prompt URI; expected prompts:/<name>@<alias>, "
                          f"prompts:/<name>/<version> or prompts:/<prefix>@<alias>")
    name, alias, version = m.groups()
    typed = _TYPED.match(name)
    if typed is None and version is not None:
        raise ConfigError(f"synth.source={uri!r}: a version pins one prompt; expected prompts:/<prefix>-synth-"
                          f"<task_type>/<version> with task_type one of {', '.join(TASK_TYPES)}")
    return Source(uri.strip(), name, typed.group(2) if typed else None, alias, int(version) if version else None)


def resolve_synth(synth: SynthConfig, uri: str) -> SynthConfig:
    """synth with the texts synth.source names, read from the registry at `uri` (the MLflow tracking store),
    in `instructions` and their pinned URIs in `resolved`."""
    src = parse_source(synth.source or "")
    db = sqlite_file(uri)
    if db is not None and not db.exists():
        raise ConfigError(f"synth.source={src.uri}: no prompt registry at {uri} (no such file); a sweep with "
                          f"mlflow.enabled=true registers its prompts there")
    try:
        found = lookup_source(registry_client(uri), src)
    except ConfigError:
        raise
    except Exception as exc:  # server down, unreadable file: the config cannot be built
        raise ConfigError(f"synth.source={src.uri}: cannot read the prompt registry at {uri}: {short_reason(exc)}") from exc
    return with_texts(synth, found)


def with_texts(synth: SynthConfig, found: Mapping[str, Any]) -> SynthConfig:
    """synth with these prompt versions' texts in `instructions` and their pinned URIs in `resolved`."""
    return dataclasses.replace(
        synth, instructions={**synth.instructions, **{tt: v.template for tt, v in found.items()}},
        resolved={tt: f"prompts:/{v.name}/{v.version}" for tt, v in sorted(found.items())})


def lookup_source(client: Any, src: Source) -> dict[str, Any]:
    if src.task_type is not None:
        if client.get_prompt(src.name) is None:
            raise ConfigError(f"synth.source={src.uri}: no prompt named {src.name!r}; registered synthesis prompts: "
                              f"{_known(client)}")
        got = prompt_version(client, src.name, src.alias, src.version)
        if got is None:
            what = f"alias {src.alias!r}" if src.alias else f"version {src.version}"
            raise ConfigError(f"synth.source={src.uri}: prompt {src.name!r} has no {what}; "
                              f"{_inventory(client, src.name)}")
        return {src.task_type: got}
    names = {tt: prompt_name(src.name, tt) for tt in TASK_TYPES}
    names = {tt: n for tt, n in names.items() if client.get_prompt(n) is not None}
    if not names:
        raise ConfigError(f"synth.source={src.uri}: no prompt {src.name}-synth-<task_type> is registered; registered "
                          f"synthesis prompts: {_known(client)}")
    found = {tt: v for tt, n in names.items() if (v := prompt_version(client, n, src.alias, None)) is not None}
    if not found:
        raise ConfigError(f"synth.source={src.uri}: none of {', '.join(names.values())} has alias {src.alias!r}; "
                          + "; ".join(f"{n}: {_inventory(client, n)}" for n in names.values()))
    return found


def prompt_version(client: Any, name: str, alias: str | None, version: int | None) -> Any:
    from mlflow.exceptions import MlflowException

    try:
        return client.get_prompt_version_by_alias(name, alias) if alias else client.get_prompt_version(name, version)
    except MlflowException:
        return None


def prompt_versions(client: Any, name: str) -> list[Any]:
    out, token = [], None
    while True:
        page = client.search_prompt_versions(name, max_results=1000, page_token=token)
        out.extend(page)
        token = getattr(page, "token", None)
        if not token:
            return sorted(out, key=lambda v: int(v.version))


def _inventory(client: Any, name: str) -> str:
    versions = [int(v.version) for v in prompt_versions(client, name)]
    aliases = sorted((a, v) for v in versions for a in client.get_prompt_version(name, v).aliases)
    return (f"versions: {', '.join(map(str, versions)) or '(none)'}; aliases: "
            f"{', '.join(f'{a} -> v{v}' for a, v in aliases) or '(none)'}")


def _known(client: Any) -> str:
    names = sorted(p.name for p in client.search_prompts(filter_string="name LIKE '%-synth-%'"))
    return ", ".join(names) or "(none)"


def registry_client(uri: str) -> Any:
    from mlflow import MlflowClient


    db = sqlite_db(uri)
    with store_lock(db):  # a SQLite store's tables are created once, on a WAL database (as the tracker does)
        if db is not None:
            enable_wal(db)
        return MlflowClient(tracking_uri=uri)


def short_reason(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:300] if lines else ''}".rstrip(": ")


