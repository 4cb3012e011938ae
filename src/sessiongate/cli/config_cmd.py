"""`sessiongate config`: the effective configuration (file + environment), secrets masked."""

from __future__ import annotations

import yaml

from sessiongate.cli._common import (
    ConfigOption,
    HomeOption,
    JsonOption,
    emit_json,
    load_paths_and_config,
)
from sessiongate.config import config_as_dict, default_config_path

__all__ = ["show_config"]


def show_config(
    home: HomeOption = None,
    config_file: ConfigOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print the effective configuration: defaults, the YAML file, then SESSIONGATE_* variables.

    Secrets (tokens, API keys) are shown as ***.
    """
    paths, config = load_paths_and_config(home, config_file)
    source = paths.config_file or default_config_path(home=paths.home)
    data = config_as_dict(config, mask_secrets=True)
    if as_json:
        emit_json({"home": str(paths.home), "config_file": str(source), "config": data})
        return
    present = "" if source.is_file() else " (not present; defaults and environment only)"
    print(f"# home: {paths.home}")
    print(f"# config file: {source}{present}")
    print(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), end="")
