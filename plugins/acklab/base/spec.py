"""Specs users write (topologies, profiles, schedules, params): validation with one-line errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class SpecError(ValueError):
    """A spec (topology, profile, fault, param) is invalid; the message names the field."""


def first_error(exc: ValidationError) -> tuple[str, str]:
    """(where, message) of a validation error's first problem: the field's dotted path ("" at the top
    level) and pydantic's message without its "Value error, " prefix."""
    first = exc.errors()[0]
    return ".".join(str(p) for p in first["loc"]), str(first["msg"]).removeprefix("Value error, ")


def parse_model(model: type[M], data: object, source: str) -> M:
    """Validate `data` as `model`; on failure raise one SpecError line naming the field."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        where, message = first_error(exc)
        raise SpecError(f"{source}: {where or '(top level)'}: {message}") from None


def load_yaml(path: Path, what: str) -> Any:
    """The YAML (or JSON) document at `path`; SpecError in one line if it is missing or malformed."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise SpecError(f"{what} {path}: no such file") from None
    except OSError as exc:
        raise SpecError(f"{what} {path}: cannot be read ({exc.strerror})") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"{what} {path}: not valid YAML{where}: {problem}") from None
