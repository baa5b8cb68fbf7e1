"""Configuration: TOML files, and plugin ``Config`` attrs classes filled strictly with cattrs."""

from __future__ import annotations

import tomllib
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import cattrs
from cattrs.v import format_exception

from dsh_core.vocabulary._errors import ConfigError

__all__ = ["load_config_file", "structure_config"]

_C = TypeVar("_C")


def _strict_converter() -> cattrs.Converter:
    """A converter that never coerces: ``"5"`` is not an int and ``1`` is not a str."""
    converter = cattrs.Converter(forbid_extra_keys=True)

    def exact(kind: type, *accepted: type) -> None:
        def structure(value: object, _: type) -> object:
            if type(value) not in accepted:
                msg = f"expected {kind.__name__}, got {type(value).__name__} {value!r}"
                raise TypeError(msg)
            return float(value) if kind is float else value  # type: ignore[arg-type]  # checked above

        converter.register_structure_hook(kind, structure)

    exact(str, str)
    exact(bool, bool)
    exact(int, int)
    exact(float, float, int)
    return converter


_converter = _strict_converter()


def structure_config(cls: type[_C], raw: object, *, source: str, path: str) -> _C:
    """Fill ``cls`` from ``raw``; a problem becomes a ``ConfigError`` naming source, path and what."""
    if not isinstance(raw, Mapping):
        msg = f"{source}: {path}: expected a table, got {type(raw).__name__} {raw!r}"
        raise ConfigError(msg, source=source, path=path)
    try:
        return _converter.structure(dict(raw), cls)
    except Exception as exc:  # noqa: BLE001 - cattrs raises many kinds; all become one ConfigError
        problems = cattrs.transform_error(exc, path=f"$.{path}", format_exception=_describe)
        lines: list[str] = []
        first_path = path
        for problem in problems:
            what, _, where = problem.rpartition(" @ ")
            dotted = where.removeprefix("$.") if where else path
            if len(lines) == 0:
                first_path = dotted
            lines.append(f"{source}: {dotted}: {_plain(what or problem)}")
        msg = "\n".join(lines) or f"{source}: {path}: {exc}"
        raise ConfigError(msg, source=source, path=first_path) from None


def _describe(exc: BaseException, expected: type | None) -> str:
    """cattrs' wording, but a validator's own message (``ValueError("must be >= 1")``) is kept."""
    if type(exc) is ValueError and exc.args:
        return str(exc)
    if typing.get_origin(expected) is typing.Literal:
        choices = ", ".join(repr(choice) for choice in typing.get_args(expected))
        got = str(exc).partition(" not in literal ")[0] if " not in literal " in str(exc) else None
        return f"expected one of {choices}" + ("" if got is None else f", got {got!r}")
    return format_exception(exc, expected)


def _plain(problem: str) -> str:
    """Make cattrs' wording say what a user should change."""
    if problem.startswith("extra fields found"):
        fields = problem.removeprefix("extra fields found").strip(" ()")
        return f"unknown key(s) {fields}"
    if problem.startswith("required field missing"):
        return "required value missing"
    return problem.replace("invalid value for type, ", "").replace("invalid type (", "").rstrip(")")


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read ``dsh.toml`` (the whole file) or ``pyproject.toml`` (its ``[tool.dsh]`` table)."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        msg = f"{path}: cannot read configuration: {exc.strerror or exc}"
        raise ConfigError(msg, source=str(path)) from exc
    except tomllib.TOMLDecodeError as exc:
        msg = f"{path}: not valid TOML: {exc}"
        raise ConfigError(msg, source=str(path)) from exc
    if path.name == "pyproject.toml":
        tool = data.get("tool", {})
        return dict(tool.get("dsh", {})) if isinstance(tool, dict) else {}
    return data
