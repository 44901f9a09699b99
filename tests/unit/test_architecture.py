"""The package's shape: its seams as layers that import only downwards, no import cycles
(module-level or inside functions), tools and test support outside the runtime, no module importing
another's underscore names, and DAG files that stay cheap to parse."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

from acklab.base.paths import PROJECT_ROOT

PACKAGE = PROJECT_ROOT / "plugins" / "acklab"


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph.find_modules_directly_imported_by(module)):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


# The seams, top first: a package imports only packages of lower layers (and itself); packages of one
# layer are independent of each other. `tools` and `testing` sit above the runtime: nothing imports them.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"tools"}),
    frozenset({"testing"}),
    frozenset({"orchestration"}),
    frozenset({"services"}),
    frozenset({"report"}),
    frozenset({"checker"}),
    frozenset({"plan"}),
    frozenset({"model"}),
    frozenset({"nemesis", "workload"}),
    frozenset({"cluster"}),
    frozenset({"proxy"}),
    frozenset({"store"}),
    frozenset({"base"}),
)
OUTSIDE_THE_RUNTIME = frozenset({"tools", "testing"})


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph("acklab", include_external_packages=False)


def _package(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert packages == set().union(*LAYERS)
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py"], "no module lies loose at the package root"


def test_imports_go_down_the_layers_only(graph: grimp.ImportGraph) -> None:
    rank = {package: len(LAYERS) - n for n, layer in enumerate(LAYERS) for package in layer}
    upward = sorted(
        f"{module} -> {target}"
        for module in graph.modules
        for target in graph.find_modules_directly_imported_by(module)
        if _package(module) and _package(target) and _package(module) != _package(target)
        and rank[_package(target)] >= rank[_package(module)]
    )
    assert upward == []


def test_the_runtime_never_imports_tools_or_test_support(graph: grimp.ImportGraph) -> None:
    offenders = sorted(
        f"{module} -> {target}"
        for module in graph.modules
        for target in graph.find_modules_directly_imported_by(module)
        if _package(target) in OUTSIDE_THE_RUNTIME and _package(module) not in OUTSIDE_THE_RUNTIME
    )
    assert offenders == []
    for folder in ("dags", "spark"):
        for path in (PROJECT_ROOT / folder).glob("*.py"):
            assert not any(f"acklab.{name}" in path.read_text() for name in OUTSIDE_THE_RUNTIME), path


def test_no_import_cycles(graph: grimp.ImportGraph) -> None:
    assert _cycles(graph) == []


def test_no_module_imports_another_modules_private_names() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("acklab"):
                private = [alias.name for alias in node.names if alias.name.startswith("_")]
                if private:
                    offenders.append(f"{path.relative_to(PACKAGE)}: from {node.module} import {', '.join(private)}")
    assert offenders == []


def test_parsing_the_dag_files_imports_no_heavy_dependency() -> None:
    """The DAG processor parses dags/ often: no pyarrow, numpy, pandas, matplotlib, Docker SDK,
    confluent_kafka (no librdkafka producer is built), Spark or Great Expectations at parse time."""
    heavy = ["pyarrow", "numpy", "pandas", "matplotlib", "docker", "confluent_kafka", "pyspark", "great_expectations"]
    probe = f"""
import importlib.util, sys
for path in sorted(__import__("pathlib").Path({str(PROJECT_ROOT / "dags")!r}).glob("*.py")):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
print(",".join(m for m in {heavy!r} if m in sys.modules))
"""
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=True)
    assert result.stdout.strip() == ""


def test_every_test_imports_project_code_as_a_package() -> None:
    """No test loads project code by file path."""
    tests = Path(__file__).resolve().parents[1]
    loaders = [str(p.relative_to(tests)) for p in tests.rglob("*.py") if "spec_from_file_location" in p.read_text() and p != Path(__file__)]
    assert loaders == []
