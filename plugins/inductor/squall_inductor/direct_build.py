"""In the worker process: what a region's direct load (squall_inductor.direct_load) needs, checked.

For a region inductor compiled for CPU, `direct_bundle` takes the wrapper's source from the
compiled graph, removes its top-level imports from torch._inductor (keeping only `AsyncCompile`,
`extern_kernels` and `CppWrapperCodeCache`, which direct_load gives; a name from any other
inductor import that the wrapper uses means no bundle), finds the library each
`async_compile.cpp_pybinding(...)` kernel (Python wrapper) or the one
`CppWrapperCodeCache.load_pybinding(...)` library (inductor's C++ wrapper) was built into, and runs the wrapper from these alone
against the compiled artifact on the example inputs: the same outputs (sizes, strides, dtypes,
bitwise values, and which inputs they alias) or no bundle. Without a bundle the user's process
loads the region through inductor, as before.
"""
from __future__ import annotations

import ast
import functools
import pickle
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch._inductor.config as inductor_config
from torch._inductor.async_compile import AsyncCompile
from torch._inductor.codecache import CppWrapperCodeCache
from torch._inductor.output_code import CompiledFxGraph
from torch._inductor.select_algorithm import extern_kernels

from squall_inductor.direct_load import DirectBundle, kernel_key, memory_extent, run_direct

__all__ = ["direct_bundle", "wrapper_source"]

# the names direct_load gives a wrapper in place of its inductor imports
_GIVEN = {"AsyncCompile", "extern_kernels", "CppWrapperCodeCache"}
# the methods of those a CPU wrapper calls: a Python wrapper's kernels, the C++ wrapper's one library
_BUILDER_METHODS = {"async_compile": {"cpp_pybinding", "wait"}, "CppWrapperCodeCache": {"load_pybinding"}}
# how many objects to look through for the compiled graph inside the artifact's wrappers
_SEARCH_LIMIT = 400


def direct_bundle(compiled_fn: Callable, args: Sequence[torch.Tensor]) -> tuple[bytes | None, str]:
    """(pickled DirectBundle, "") for the region inductor compiled into `compiled_fn` (a
    CompiledArtifact's function), checked on `args` (its inputs, lifted constants included);
    (None, why) where it cannot be loaded directly."""
    graph = _compiled_graph(compiled_fn)
    if graph is None:
        return None, "no single compiled graph found in the artifact"
    if graph.device_types - {"cpu"}:
        return None, f"devices {sorted(graph.device_types)}"
    source, why = wrapper_source(graph.source_code)
    if source is None:
        return None, why
    builder = _RecordingCompile()
    bundle = DirectBundle(source=source, kernels={}, entries=builder.entries, inputs_to_check=list(graph.inputs_to_check), externs={})
    for name in _extern_names(source):
        dotted = _dotted(getattr(extern_kernels, name, None))
        if dotted is None:
            return None, f"extern kernel {name} is not a torch function"
        bundle.externs[name] = dotted
    try:
        with inductor_config.patch({"compile_threads": 1}):
            direct = run_direct(bundle, builder)
        expected = compiled_fn(*[_copy(a) for a in args])
        inputs = [_copy(a) for a in args]
        got = direct(*inputs)
    except Exception as e:  # noqa: BLE001 - not loadable directly: the artifact serves
        return None, f"{type(e).__name__}: {e}"
    why = _differs(expected, got, inputs)
    if why:
        return None, why
    bundle.kernels = builder.libraries
    return pickle.dumps(bundle), ""


def wrapper_source(source: str) -> tuple[str | None, str]:
    """(the wrapper's source without its docstring and top-level torch._inductor imports, "") or
    (None, why) where it needs from inductor more than direct_load gives."""
    tree = ast.parse(source)
    removed: list[tuple[int, int]] = []
    dropped: set[str] = set()
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        removed.append((body[0].lineno, body[0].end_lineno))  # autotuning notes, text only
    for node in body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[:2] == ["torch", "_inductor"]:
            removed.append((node.lineno, node.end_lineno))
            dropped |= {alias.asname or alias.name for alias in node.names}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if any(m.startswith(("torch._inductor", "torch._dynamo", "triton")) for m in modules):
                return None, f"it imports {', '.join(modules)}"
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    missing = (dropped - _GIVEN) & used
    if missing:
        return None, f"it uses {', '.join(sorted(missing))} from inductor"
    for builder, methods in _BUILDER_METHODS.items():
        calls = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == builder}
        if calls - methods:
            return None, f"it compiles kernels with {builder}.{', '.join(sorted(calls - methods))}"
    lines = source.splitlines(keepends=True)
    for first, last in removed:
        for i in range(first - 1, last):
            lines[i] = "\n"  # line numbers kept, so a traceback points where inductor's would
    return "".join(lines), ""


class _RecordingCompile:
    """inductor's AsyncCompile (one kernel at a time) and CppWrapperCodeCache, noting each kernel's built library."""

    def __init__(self):
        self.libraries: dict[str, bytes] = {}  # kernel_key -> the built library's bytes
        self.kernels: dict[str, Callable] = {}
        self.entries: dict[str, str] = {}  # kernel_key -> the library's function name

    def cpp_pybinding(self, argtypes: Sequence[str], source: str) -> Callable:
        # built before: a cache hit
        return self._record(kernel_key(argtypes, source), AsyncCompile().cpp_pybinding(argtypes, source))

    def load_pybinding(self, *, argtypes: Sequence[str], main_code: str, kernel_code: str | None = None, **options: Any) -> Callable:
        kernel = CppWrapperCodeCache.load_pybinding(argtypes=argtypes, main_code=main_code, kernel_code=kernel_code, **options)
        return self._record(kernel_key(argtypes, main_code + (kernel_code or "")), kernel)

    def _record(self, key: str, kernel: Callable) -> Callable:
        self.libraries[key] = _library(kernel.__self__.__file__)  # the extension module inductor loaded it from
        self.kernels[key] = kernel
        self.entries[key] = kernel.__name__
        return kernel

    def wait(self, scope: dict) -> None:
        pass


@functools.lru_cache(maxsize=512)
def _library(path: str) -> bytes:
    """The bytes of the library at `path`, kept once read. A symbolic region compiles in a fresh
    temporary cache folder (worker_main.compile_symbolic); on torch 2.10 a kernel a compile before it
    built (the same source) is found loaded, its module's file that compile's folder, deleted since.
    A library's path holds the hash of its source and build, so the bytes kept are the ones asked for."""
    with open(path, "rb") as f:
        return f.read()


def _compiled_graph(fn: Callable) -> CompiledFxGraph | None:
    """The one CompiledFxGraph inside an artifact's function (in its wrappers' closures and attributes)."""
    found, seen, todo = [], set(), [fn]
    while todo and len(seen) < _SEARCH_LIMIT:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, (type, type(torch), str, bytes, int, float, torch.Tensor)):
            continue
        seen.add(id(obj))
        if isinstance(obj, CompiledFxGraph):
            found.append(obj)
            continue
        for cell in getattr(obj, "__closure__", None) or ():
            try:
                todo.append(cell.cell_contents)
            except ValueError:  # an empty cell
                pass
        if isinstance(obj, (list, tuple)):
            todo.extend(obj)
        elif not callable(obj) or not hasattr(obj, "__code__"):
            todo.extend(getattr(obj, "__dict__", {}).values())
    return found[0] if len(found) == 1 else None


def _extern_names(source: str) -> set[str]:
    tree = ast.parse(source)
    return {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "extern_kernels"}


def _dotted(fn: Any) -> str | None:
    """`fn`'s dotted path from torch where it is torch's own function or ATen operator, else None."""
    if isinstance(fn, torch._ops.OpOverload):
        namespace, name = fn._schema.name.split("::")
        return f"torch.ops.{namespace}.{name}.{fn._overloadname}"
    name = getattr(fn, "__name__", None)
    if name and getattr(torch, name, None) is fn:
        return f"torch.{name}"
    return None


def _copy(t: Any) -> Any:
    if not isinstance(t, torch.Tensor):
        return t
    # the memory t's strides reach, copied and viewed alike: strides that overlap (stride 0) copy too
    span = t.as_strided((memory_extent(t.shape, t.stride()),), (1,))
    return span.clone().as_strided(t.shape, t.stride())


def _differs(expected: Any, got: Any, inputs: Sequence[Any]) -> str:
    """Why the direct run's outputs are not the artifact's ("" where they are)."""
    expected, got = list(expected), list(got)
    if len(expected) != len(got):
        return f"{len(got)} outputs where the artifact returns {len(expected)}"
    pointers = {a.untyped_storage().data_ptr() for a in inputs if isinstance(a, torch.Tensor)}
    for i, (e, g) in enumerate(zip(expected, got)):
        if not isinstance(e, torch.Tensor) or not isinstance(g, torch.Tensor):
            if e != g:
                return f"output {i} differs"
            continue
        if (e.shape, e.stride(), e.dtype, e.requires_grad) != (g.shape, g.stride(), g.dtype, g.requires_grad):
            return f"output {i}'s layout differs"
        if not torch.equal(e, g) and not (e.is_floating_point() and torch.equal(e.isnan(), g.isnan()) and torch.equal(e.nan_to_num(), g.nan_to_num())):
            return f"output {i}'s values differ"
        if g.untyped_storage().data_ptr() in pointers:
            return f"output {i} aliases an input"  # the artifact's wrappers may make such outputs views: not checked
    return ""
