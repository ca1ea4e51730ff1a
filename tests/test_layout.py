"""The layout a reader relies on: imports inside core/ point one way, and every package ships."""
from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = ("hookspecs", "operations", "executor", "fusion", "plugins", "extend", "torch_executor", "sources", "config")


def module_imports(path: Path, module: str) -> set[str]:
    """The squall modules `path` (the module `module`) imports, relative imports resolved, anywhere in it."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
            target = f"{base}.{node.module}" if node.module else base
            found.add(target)
            found.update(f"{target}.{a.name}" for a in node.names)  # `from . import ltorch` names a module
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found.update(n for n in names if n == "squall" or n.startswith("squall."))
    return found


def core_import_graph() -> dict[str, set[str]]:
    files = {}
    for path in (ROOT / "core").rglob("*.py"):
        parts = path.relative_to(ROOT / "core").with_suffix("").parts
        files["squall" + "".join(f".{p}" for p in parts if p != "__init__")] = path
    # the root package imports everything for its public face; a subpackage import runs its __init__
    graph = {m: {t for t in module_imports(p, m) if t in files and t != "squall"} for m, p in files.items()}
    for deps in graph.values():
        deps.update({d.rpartition(".")[0] for d in deps if d.count(".") > 1})
    return graph


def _reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), list(graph[start])
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo.extend(graph.get(m, ()))
    return seen


def test_the_plugin_contract_modules_import_one_way():
    graph = core_import_graph()
    assert "squall.extend" not in _reachable(graph, "squall.plugins")  # the extend <-> plugins cycle is gone
    for name in CONTRACT:
        assert f"squall.{name}" not in _reachable(graph, f"squall.{name}"), f"squall.{name} is part of an import cycle"
    # nothing the planner, code generator or jit builds on imports them back
    for name in ("operations", "executor", "fusion", "plugins", "extend"):
        assert not {"squall.compiler.planner", "squall.compiler.codegen", "squall.jit", "squall.explain"} & _reachable(graph, f"squall.{name}")




def test_no_module_in_core_is_part_of_an_import_cycle():
    graph = core_import_graph()
    # a module importing a sibling runs inside its package's __init__ already: not a cycle
    for module, deps in graph.items():
        graph[module] = {d for d in deps if d != module and not module.startswith(d + ".")}
    cycles = [m for m in graph if m != "squall" and m in _reachable(graph, m)]
    assert not cycles, f"import cycles through {cycles}"


def test_pyproject_ships_every_package_under_core():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert config["package-dir"] == {"squall": "core"}
    on_disk = {
        "squall" + "".join(f".{p}" for p in init.parent.relative_to(ROOT / "core").parts)
        for init in (ROOT / "core").rglob("__init__.py")
    }
    assert set(config["packages"]) == on_disk
