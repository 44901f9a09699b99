"""docs/checks.md, generated from the checks' registry (`acklab.plan.checks.CHECKS`): each check's
name, what it checks (its docstring) and its arguments (its model's fields). A unit test checks the
committed copy is current; `checks_markdown()` is the page."""

from __future__ import annotations

import inspect
import re
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic.fields import FieldInfo

from acklab.base.paths import PROJECT_ROOT
from acklab.plan.checks import CHECKS, Check
from acklab.plan.preset_files import CATALOG_FOLDER, PRESETS_DIR_ENV

DOC = PROJECT_ROOT / "docs" / "checks.md"

INTRO = f"""\
# Preset checks

A preset (`acklab presets`) states what its source claims happens, each claim with the check that tests
it against the run's evidence. Presets are data: the catalog's are `plugins/acklab/{CATALOG_FOLDER}/*.yaml`,
and a team adds its own file (`acklab run --presets-file FILE --preset NAME`, `acklab presets
--presets-file FILE`; a DAG run names a file by NAME, its `NAME.yaml` in the catalog's folder or in
`${PRESETS_DIR_ENV}`). Each file's opening comment shows how a preset is written.

An observation's `check` is one mapping, a check's name to its arguments:
`{{matrix_count: {{column: lost, op: '==', value: 0}}}}`. A check of one argument may take it alone
(`{{all_of: [CHECK, CHECK]}}`). Checks combine through `all_of` (every one holds) and, by version,
`fixed_in` and `affected_versions` (a documented bug and its fix). An observation about some client
families only lists them (`families: [java]`); a check itself never depends on the family's name.

A check answers whether the claim was reproduced and what acklab measured; an observation whose
scenario is missing or incomplete is `untested`. The run's verdict stays the guarantee model's.

`acklab explore` labels a red row with the catalog bug it shows: a fixed bug when the bug side of a
versioned check of its preset (`fixed_in`'s `before`, `affected_versions`' `affected`) holds on the
row, on a version the bug is documented in; an open bug when its preset's `signature` (`{{families:
[F], check: CHECK}}`, the check any red row of the bug passes) holds on a row of those families.

This page is generated from `acklab.plan.checks`."""


def _type(annotation: Any) -> str:
    """How the page names an argument's type."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _type(args[0])
    if origin is Literal:
        return " \\| ".join(f"`{value}`" for value in args)
    if origin in (list, tuple):
        return f"list of {_type(args[0])}s"
    if origin is dict:
        return f"mapping of {_type(args[0])} to {_type(args[1])}"
    if origin in (UnionType, Union):
        return " or ".join(_type(arg) for arg in args)
    if isinstance(annotation, type) and issubclass(annotation, Check):
        return "check"
    return {str: "text", int: "integer", float: "number", bool: "true/false"}.get(annotation, str(annotation))


def _summary(check: type[Check]) -> str:
    """A check's docstring up to its first full stop."""
    text = " ".join(inspect.cleandoc(check.__doc__ or "").split())
    return re.split(r"(?<=\.)\s+(?=[A-Z])", text, maxsplit=1)[0]


def _argument(name: str, field: FieldInfo) -> str:
    default = "" if field.is_required() else f" (default: `{field.get_default(call_default_factory=True)!r}`)"
    return f"| `{name}` | {_type(field.annotation)} | {field.description or ''}{default} |"


def _section(name: str, check: type[Check]) -> list[str]:
    lines = [f"## `{name}`", "", inspect.cleandoc(check.__doc__ or ""), ""]
    if check.model_fields:
        lines += ["| argument | type | meaning |", "|---|---|---|"]
        lines += [_argument(field_name, field) for field_name, field in check.model_fields.items()]
    else:
        lines.append("No arguments.")
    return [*lines, ""]


def checks_markdown() -> str:
    """The reference page of every registered check (docs/checks.md)."""
    lines = [INTRO, "", "| check | what it checks |", "|---|---|"]
    lines += [f"| [`{name}`](#{name}) | {_summary(check)} |" for name, check in CHECKS.items()]
    lines.append("")
    for name, check in CHECKS.items():
        lines += _section(name, check)
    return "\n".join(lines).rstrip() + "\n"
