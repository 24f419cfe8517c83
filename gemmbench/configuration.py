"""Experiment configuration: validated against workflow/schemas/config.schema.yaml, defaults filled in."""
from __future__ import annotations

import copy
import logging
from pathlib import Path

import yaml

from gemmbench import ROOT

SCHEMA_PATH = ROOT / "workflow" / "schemas" / "config.schema.yaml"
# Keys renamed so that each says which sizes it holds: (section, old name, new name). An old key is still read, with
# one line saying so; given beside the new one (a config file over the defaults), the old one is the user's, and wins.
RENAMED = ((), "sizes", "square_sizes"), (("profile",), "sizes", "profiled_sizes"), \
    (("tune",), "sizes", "size_classes"), (("tune", "autotuner"), "sizes", "size_classes")
log = logging.getLogger("gemmbench")
_said: set[str] = set()


class ConfigError(ValueError):
    """A configuration problem, with a message that names the offending key."""


def _with_defaults(validator_class):
    """A validator that also fills in each missing property's default (the jsonschema FAQ recipe)."""
    check_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = copy.deepcopy(sub["default"])
        yield from check_properties(validator, properties, instance, schema)

    import jsonschema

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def _location(error) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
    return path or "(top level)"


SCALARS = {"integer": int, "number": float, "boolean": bool}


def _typed(value, schema: dict):
    """Values from `snakemake --config` arrive as strings (Snakemake reads them with YAML's BaseLoader):
    read a string as YAML where the schema wants a number or a boolean, inside lists and mappings too."""
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        return {k: _typed(v, properties.get(k, extra if isinstance(extra, dict) else {})) for k, v in value.items()}
    if isinstance(value, list):
        items = schema.get("items", {})
        return [_typed(v, items if isinstance(items, dict) else {}) for v in value]
    wanted = schema.get("type")
    if isinstance(value, str) and any(t in SCALARS for t in (wanted if isinstance(wanted, list) else [wanted])):
        parsed = yaml.safe_load(value)
        return parsed if isinstance(parsed, (int, float, bool)) else value
    return value


def _renamed(config: dict) -> dict:
    """`config` with the keys of RENAMED under their new names, each old one said once per process."""
    for path, old, new in RENAMED:
        section = config
        for name in path:
            section = section.get(name) if isinstance(section, dict) else None
        if isinstance(section, dict) and old in section:
            where = ".".join((*path, old))
            if where not in _said:
                _said.add(where)
                log.warning("config: %s is now %s (the old name is still read)", where, ".".join((*path, new)))
            section[new] = section.pop(old)
    return config


def validate(config: dict | None) -> dict:
    """A validated copy of `config` with defaults filled in; ConfigError names every problem."""
    schema = yaml.safe_load(SCHEMA_PATH.read_text())
    config = _typed(_renamed(copy.deepcopy(config or {})), schema)
    if "tolerance" in config:
        raise ConfigError("invalid gemmbench config: tolerance is no longer read: each mode's error bound follows "
                          "from its arithmetic's unit roundoff and the reduction length (gemmbench/measure/checking.py)"
                          "; remove the key")
    import jsonschema  # here, not at the top: a measure job imports this module but validates nothing (its start)

    validator = _with_defaults(jsonschema.Draft202012Validator)(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"  {_location(e)}: {e.message}" for e in errors]
        raise ConfigError("invalid gemmbench config:\n" + "\n".join(lines))
    timing = config["timing"]
    if timing["min_samples"] > timing["max_samples"]:
        raise ConfigError(f"invalid gemmbench config:\n  timing: min_samples ({timing['min_samples']}) "
                          f"is larger than max_samples ({timing['max_samples']})")
    return config


def read(path: str | Path) -> dict:
    """A config file's keys, or a ConfigError that says in one line why it cannot be one."""
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {path}: cannot be read as text ({type(exc).__name__}: {exc})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {' '.join(str(exc).split())}") from None
    if raw is not None and not isinstance(raw, dict):
        raise ConfigError(f"config file {path}: expected a mapping of config keys, found {type(raw).__name__}")
    return raw or {}


def merged(base: dict, over: dict) -> dict:
    """`over` merged into `base`, mappings key by key, as Snakemake merges --configfile and --config over its
    configfile."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merged(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def command_line(item: str) -> dict:
    """One `snakemake --config KEY=VALUE` item as Snakemake reads it: VALUE as YAML of strings (validate types it)."""
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"--config {item!r}: expected KEY=VALUE")
    try:
        return {key: yaml.load(value, Loader=yaml.BaseLoader)}
    except yaml.YAMLError as exc:
        raise ConfigError(f"--config {key}: {value!r} is not valid YAML ({' '.join(str(exc).split())})") from None


def load(path: str | Path) -> dict:
    return validate(read(path))
