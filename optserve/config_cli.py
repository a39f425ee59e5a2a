"""`optserve config show`: the effective settings (defaults < YAML file < OPTSERVE_* environment) and where
each field's value came from. Secrets (serve.auth_token) print masked."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from optserve.cli import add_json_flag, command_group, emit


def register(subparsers) -> None:
    config = command_group(subparsers, "config", help="optserve's settings")
    show = config.add_parser(
        "show", help="the effective settings and each field's source (default, file or env)"
    )
    show.add_argument("--config", help="optserve YAML config (default: $OPTSERVE_CONFIG, else none)")
    add_json_flag(show)
    show.set_defaults(handler=_show)


def effective_settings(config_file: str | None = None) -> dict[str, Any]:
    """The settings `optserve serve` and the other commands would read, as JSON-typed data: the config
    file, and for each `section.field` its value (secrets masked), source and environment variable."""
    from optserve.config import env_name, load_settings_with_sources

    loaded = load_settings_with_sources(config_file)
    values = loaded.settings.model_dump(mode="json")  # a SecretStr dumps as "**********"
    fields = {}
    for field, source in loaded.sources.items():
        section, name = field.split(".")
        fields[field] = {"value": values[section][name], "source": source, "env": env_name(field)}
    return {"config_file": str(loaded.config_file) if loaded.config_file else None, "fields": fields}


def _render(result: Mapping[str, Any]) -> str:
    lines = [f"# config file: {result['config_file'] or 'none'}; sources: default < file < env"]
    width = max(len(field) for field in result["fields"])
    for field, entry in result["fields"].items():
        lines.append(f"{field:<{width}}  {entry['value']!r}  ({entry['source']})")
    return "\n".join(lines)


def _show(args) -> int:
    from optserve.config import SettingsError

    try:
        result = effective_settings(args.config)
    except SettingsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    emit(result, args.json, _render)
    return 0
