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


# Sites outside acklab.workload allowed to choose by a client family's name, as `file: function`:
# none. What differs between families is a fact of the family object (`acklab.workload.families`,
# `FamilyFacts`); a site listed here would be a debt to replace by one, so the list only shrinks.
FAMILY_BRANCHING_ALLOWED: frozenset[str] = frozenset()


def _family_branches(source: str, file: str, names: frozenset[str]) -> list[str]:
    """`file: function` of each place in `source` (the text of `file`) that decides by a client family's name: a comparison
    (==, !=, in, is) with a family name (a string constant, or `java_client.NAME` / `families.DEFAULT`),
    a `case` on one, or a family picked by name from `FAMILIES`. Family names as data (a dict literal's
    keys, a list of clients, an argument, help text) are not decisions."""

    def names_a_family(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in names
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            return (node.value.id, node.attr) in {("java_client", "NAME"), ("families", "DEFAULT")}
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            return any(names_a_family(element) for element in node.elts)
        return False

    def decides(node: ast.AST) -> bool:
        if isinstance(node, ast.Compare):
            return any(names_a_family(operand) for operand in (node.left, *node.comparators))
        if isinstance(node, ast.match_case):
            return any(isinstance(p, ast.MatchValue) and names_a_family(p.value) for p in ast.walk(node.pattern))
        if isinstance(node, ast.Subscript):
            table = node.value.attr if isinstance(node.value, ast.Attribute) else getattr(node.value, "id", "")
            return table == "FAMILIES" and names_a_family(node.slice)
        return False

    found = []

    def visit(node: ast.AST, scope: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            scope = f"{scope}.{node.name}" if scope else node.name
        if decides(node):
            found.append(f"{file}: {scope or '<module>'}")
        for child in ast.iter_child_nodes(node):
            visit(child, scope)

    visit(ast.parse(source), "")
    return found


def test_no_code_outside_the_client_seam_branches_on_a_family_name() -> None:
    """Outside acklab.workload, code asks the family object (`acklab.workload.families`) for what
    differs between clients, never compares a family's name."""
    from acklab.workload.families import FAMILIES

    names = frozenset(FAMILIES)
    sites = {
        site
        for path in sorted(PACKAGE.rglob("*.py"))
        if "workload" not in path.relative_to(PACKAGE).parts[:1]
        for site in _family_branches(path.read_text(), str(path.relative_to(PACKAGE)), names)
    }
    assert sorted(sites - FAMILY_BRANCHING_ALLOWED) == []
    assert sorted(FAMILY_BRANCHING_ALLOWED - sites) == [], "a listed site is gone: remove it from FAMILY_BRANCHING_ALLOWED"


def test_the_family_scan_finds_each_form_of_branching() -> None:
    source = (
        "def a(f):\n    return f == 'java'\n"
        "def b(f):\n    return f in ('librdkafka', 'x')\n"
        "class C:\n    def c(self, f):\n        match f:\n            case 'java':\n                return 1\n"
        "def d():\n    return families.FAMILIES['librdkafka']\n"
        "def e(spec):\n    return spec == java_client.NAME\n"
        "def data():\n    return {'java': {}, 'librdkafka': {}}, ['java'], run(client='java'), rates['java']\n"
    )
    found = _family_branches(source, "probe.py", frozenset({"java", "librdkafka"}))
    assert found == ["probe.py: a", "probe.py: b", "probe.py: C.c", "probe.py: d", "probe.py: e"]
