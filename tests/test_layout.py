"""The layout a reader relies on: imports inside core/ point one way, and every package ships."""
from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = (
    "market.hookspecs", "market.operations", "market.executor", "market.fusion", "market.plugins", "extend",
    "market.torch_executor", "sources", "market.config",
)  # fmt: skip

# The stages of core/, in the order imports may point: a module imports from its own stage or an
# earlier one, never a later one. The top level holds the vocabulary (first) and the public face
# (last, it may import from every stage); every folder of core/ is one stage.
VOCABULARY = {"proxies", "proxy_methods", "symbol", "replays", "trace", "symbolic", "size_polynomials", "symshape", "guards", "guard_set",
              "sources", "checkpoint_regions"}  # (which torch.utils.checkpoint call a recorded call ran in: BoundSymbol.checkpoint_region)
STAGES = (
    "squall.prims",  # primitives and their meta functions
    "squall.ltorch",  # the torch language over prims (and how its ops take run-time numbers)
    "squall.market",  # hookspecs, plugin discovery, executor classes, config, the torch executor
    "squall.frontend",  # Python -> Trace: tracing, speculation, state reading, outputs, views
    "squall.compiler",  # Trace -> Trace -> code: gradients, planning, passes, codegen, pipeline
    "squall.runtime",  # call time: jit, entry point, cache entries, guards at call time, tiers, records
    "squall.tools",  # what a person runs: cli, explain, demo, the rage bundle
)
PUBLIC_FACE = {"squall", "squall.__main__", "squall.extend"}
# (importer, imported) -> why an import against the order is right. Empty, and meant to stay so;
# an entry must name a real import that needs it (a stale entry fails the test).
EXCEPTIONS: dict[tuple[str, str], str] = {}


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
    assert "squall.extend" not in _reachable(graph, "squall.market.plugins")  # the extend <-> plugins cycle is gone
    for name in CONTRACT:
        assert f"squall.{name}" not in _reachable(graph, f"squall.{name}"), f"squall.{name} is part of an import cycle"
    # nothing the planner, code generator or jit builds on imports them back
    built_on_them = {"squall.compiler.planner", "squall.compiler.codegen", "squall.runtime.jit", "squall.tools.explain"}
    for name in ("market.operations", "market.executor", "market.fusion", "market.plugins", "extend"):
        assert not built_on_them & _reachable(graph, f"squall.{name}")


def stage_of(module: str) -> int:
    """The place of `module`'s stage in the order: 0 the vocabulary, then STAGES, then the public face."""
    if module in PUBLIC_FACE:
        return len(STAGES) + 1
    package = ".".join(module.split(".")[:2])
    if package in STAGES:
        return STAGES.index(package) + 1
    is_folder = (ROOT / "core" / package.split(".")[1]).is_dir()
    if not is_folder and package.split(".")[1] in VOCABULARY:
        return 0
    where = f"core/{package.split('.')[1]}/" if is_folder else f"core/{package.split('.')[1]}.py"
    raise AssertionError(
        f"{where} is in no stage: core/'s top level holds only the vocabulary ({', '.join(sorted(VOCABULARY))}) "
        f"and the public face; put it in the folder of its stage, or add a new folder to STAGES"
    )


def test_every_module_in_core_has_a_stage():
    for module in core_import_graph():
        stage_of(module)


def test_imports_point_from_later_stages_to_earlier_ones():
    graph = core_import_graph()
    backwards = sorted((m, d) for m, deps in graph.items() for d in deps if stage_of(d) > stage_of(m))
    unexplained = [f"{m} imports {d}" for m, d in backwards if (m, d) not in EXCEPTIONS]
    assert not unexplained, "imports against the stage order (tests/test_layout.py STAGES): " + "; ".join(unexplained)
    stale = [pair for pair in EXCEPTIONS if pair not in backwards]
    assert not stale, f"EXCEPTIONS no import needs any more: {stale}"


def test_a_stage_folder_init_imports_nothing():
    # importing any module of a folder runs its __init__ first: a stage's __init__ that imported
    # its modules would hand all of its stage to whoever needs one module (squall.extend needs
    # squall.runtime.choices, not the jit). prims/ and ltorch/ build their op tables there.
    graph = core_import_graph()
    for stage in STAGES:
        if stage in ("squall.prims", "squall.ltorch"):
            continue
        imports = sorted(d for d in graph.get(stage, ()) if d != stage)
        assert not imports, f"core/{stage.split('.')[1]}/__init__.py imports {imports}: keep it a docstring; import from the modules themselves"


def test_the_order_check_sees_a_backward_import():
    # the check above passes only if it can fail: a frontend module importing the runtime is caught
    assert stage_of("squall.runtime.jit") > stage_of("squall.frontend.tracing")
    assert stage_of("squall.proxies") < stage_of("squall.prims.base") < stage_of("squall.tools.cli") < stage_of("squall.extend")
    with pytest.raises(AssertionError, match="core/stray.py is in no stage"):
        stage_of("squall.stray")


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
