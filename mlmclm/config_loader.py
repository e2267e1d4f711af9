"""The config loader: an instance of a config dataclass from a YAML file, a YAML string or a dict, with dotted
overrides, every field checked against its type with one clear line per bad field, and dumped back to YAML.

    cfg = load_config(PretrainConfig, "run.yaml", ["optim.lr=3e-4", "phases=[[clm, 100], [mlm, 200]]"])

A dataclass may define `validate(self)` that raises `ConfigError` for cross-field rules; it runs after loading and
changes nothing. The value checks the configs' fields call (`check_name`, `check_range`, `check_seed`, ...) are here
too. It knows no config of this package: those are `mlmclm.config`'s, which re-exports this module's names.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union

import yaml

from .errors import ConfigError


# ---- names and numbers: each checked once, with the reason; the configs' fields call these ----
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
SEED_LIMIT = 2 ** 32  # seeds are mixed with steps into 64-bit generator seeds


def check_name(value, what: str) -> str:
    """`value` as a name that becomes one folder (a scale, a run id, a model id): letters, digits, '.', '_' and '-',
    starting with a letter or digit, so that it never names `.`, `..`, a hidden folder, an option or a subfolder."""
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise ConfigError(f"{what} {value!r} must be one folder name: letters, digits, '.', '_' and '-', starting "
                          f"with a letter or digit (it names a folder of results or checkpoints)")
    return value


def check_range(what: str, value, low=None, high=None, low_open=False, high_open=False, why: str = "") -> None:
    """A `ConfigError` when `value` lies outside [low, high] (an open end excludes its bound), saying why."""
    below = low is not None and (value <= low if low_open else value < low)
    above = high is not None and (value >= high if high_open else value > high)
    if below or above:
        span = f"{'(' if low_open else '['}{'-inf' if low is None else low}, " \
               f"{'inf' if high is None else high}{')' if high_open or high is None else ']'}"
        raise ConfigError(f"{what} must be in {span}, got {value}" + (f": {why}" if why else ""))


def check_unique(what: str, values: list) -> None:
    """A `ConfigError` for a list that names one value twice (equal numbers count as one: 1e-3 and 0.001)."""
    for i, value in enumerate(values):
        if value in values[:i]:
            raise ConfigError(f"{what} names {value!r} twice ({values}); list each once")


def check_seed(what: str, value: int) -> None:
    check_range(what, value, 0, SEED_LIMIT, high_open=True, why="a seed is a non-negative 32-bit integer")


def check_adam(prefix: str, betas, eps: float, weight_decay: float) -> None:
    """AdamW's hyperparameters, in pretraining and fine-tuning alike."""
    for i, beta in enumerate(betas):
        check_range(f"{prefix}betas[{i}]", beta, 0, 1, high_open=True, why="a moment's decay rate")
    check_range(f"{prefix}eps", eps, 0, low_open=True, why="it keeps the update's division away from zero")
    check_range(f"{prefix}weight_decay", weight_decay, 0, why="a decay rate (0: none)")


def load_config(cls, source: str | Path | dict | None = None, overrides: typing.Sequence[str] = ()):
    """An instance of dataclass `cls` from a YAML file, a YAML string or a dict, with `key.sub=value` overrides."""
    if source is None:
        data = {}
    elif isinstance(source, dict):
        data = source
    else:
        path = Path(source)
        if path.is_dir():
            raise ConfigError(f"config file {path} is a folder; name a YAML file")
        if not path.is_file():
            raise ConfigError(f"config file {path} does not exist")
        _, data = read_yaml(path)
        if data is None:
            raise ConfigError(f"{path}: the config is empty; give at least the keys that make the run yours "
                              f"(run_id, phases, ...)")
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: expected a mapping of config keys at the top level")
    data = apply_overrides(data, overrides)
    return from_dict(cls, data)


def read_yaml(path: str | Path) -> tuple[str, typing.Any]:
    """A YAML file's text and what it holds; a file that cannot be read, is not UTF-8 or does not parse is a one-line
    `ConfigError` naming it (and the line and column of a syntax error)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        return text, yaml.safe_load(text)
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot be read ({e.strerror or e})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ConfigError(f"{path}: malformed YAML{where}: {getattr(e, 'problem', e)}") from None


def apply_overrides(data: dict, overrides: typing.Sequence[str]) -> dict:
    """A copy of `data` with each `dotted.key=value` set (values parsed as YAML: 3e-4, true, [a, b])."""
    data = _deepcopy(data)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"override {item!r} must look like dotted.key=value")
        try:
            value = yaml.safe_load(raw) if raw.strip() else raw
        except yaml.YAMLError:
            value = raw
        node = data
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"override {item!r}: {part} is not a section")
        node[parts[-1]] = value
    return data


def from_dict(cls, data: dict, prefix: str = ""):
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'} must be a mapping of config keys, got {data!r}")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    for key in data:
        if key not in fields:
            close = difflib.get_close_matches(str(key), fields, n=1)
            hint = f"; did you mean {prefix}{close[0]}?" if close else f"; known keys: {', '.join(fields)}"
            raise ConfigError(f"unknown config key {prefix}{key}{hint}")
    kwargs = {k: _convert(hints[k], v, f"{prefix}{k}") for k, v in data.items()}
    obj = cls(**kwargs)
    if hasattr(obj, "validate"):
        obj.validate()
    return obj


def _form(tp) -> str:
    """What a value of type `tp` looks like, for an error: "an integer", "'auto'", "a list", ..."""
    if typing.get_origin(tp) is Literal:
        return " or ".join(map(repr, typing.get_args(tp)))
    words = {int: "an integer", float: "a number", str: "a text", bool: "true or false", list: "a list",
             tuple: "a list", dict: "a mapping"}
    return words.get(typing.get_origin(tp) or tp, "a mapping" if dataclasses.is_dataclass(tp) else str(tp))


def check_value(tp, value, name: str):
    """`value` as a value of type `tp` (an annotation as a config field has: `bool`, `str | None`, `list[int]`), named
    `name`: a `ConfigError` naming it and what it must be otherwise, as for a config's field."""
    return _convert(tp, value, name)


def _convert(tp, value, name: str):
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value, name + ".")
    if origin in (Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors, forms = [], [a for a in args if a is not type(None)]
        for arg in forms:
            try:
                return _convert(arg, value, name)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if len(errors) == 1 else
                          f"{name} must be {' or '.join(map(_form, forms))}, got {value!r}")
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{name}={value!r} is not allowed; choose one of {', '.join(map(str, args))}")
        return value
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name} must be a list, got {value!r}")
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(value) != len(args):
                raise ConfigError(f"{name} must have {len(args)} items, got {value!r}")
            return tuple(_convert(a, v, f"{name}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
        item = args[0] if args else Any
        out = [_convert(item, v, f"{name}[{i}]") for i, v in enumerate(value)]
        return tuple(out) if origin is tuple else out
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{name} must be a mapping, got {value!r}")
        if len(args) == 2:
            return {_convert(args[0], k, name): _convert(args[1], v, f"{name}.{k}") for k, v in value.items()}
        return dict(value)
    return _convert_scalar(tp, value, name)


def _convert_scalar(tp, value, name: str):
    """`value` checked as a bool, int, float or str of field `name` (a whole float is an int, a number's text a float);
    any other type passes as it is."""
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{name} must be true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                return int(value)
            raise ConfigError(f"{name} must be an integer, got {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            try:  # YAML reads 5e-4 (no dot) as a string
                number = float(value) if isinstance(value, str) else None
            except ValueError:
                number = None
            if number is None:
                raise ConfigError(f"{name} must be a number, got {value!r}")
            return _convert_scalar(float, number, name)
        if not math.isfinite(value):
            raise ConfigError(f"{name} must be a finite number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{name} must be a string, got {value!r}")
        return value
    return value


# The metadata of a field added after runs were recorded with its default behaviour: written only when set to another
# value, so that every config.yaml recorded before it (and the identity hashed from it) stays byte for byte the same.
WRITTEN_WHEN_SET = {"written_when_set": True}


def to_dict(obj) -> dict:
    """Plain dict (lists, not tuples) of a config dataclass, for YAML and JSON; a `WRITTEN_WHEN_SET` field at its
    default is left out (reading it back gives the default)."""
    def plain(x):
        if dataclasses.is_dataclass(x):
            return {f.name: plain(getattr(x, f.name)) for f in dataclasses.fields(x)
                    if not (f.metadata.get("written_when_set") and getattr(x, f.name) == f.default)}
        if isinstance(x, (list, tuple)):
            return [plain(v) for v in x]
        if isinstance(x, dict):
            return {k: plain(v) for k, v in x.items()}
        return x
    return plain(obj)


def to_yaml(obj) -> str:
    return yaml.safe_dump(to_dict(obj), sort_keys=False, default_flow_style=None)


def _deepcopy(x):
    if isinstance(x, dict):
        return {k: _deepcopy(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_deepcopy(v) for v in x]
    return x
