"""The compile worker process: compiles inductor regions sent by squall_inductor.worker.

Started by squall_inductor.worker with FD one end of a socket pair, at a lower priority set
before torch is imported (the threads torch starts and the C++ compilers inductor starts
inherit it). It answers requests one at a time until the socket closes:

    ("compile", payload, layouts, config, num_threads, time_budget_s, path)
      -> ("ok", torch_s, inductor_s, pickled tensor constants, direct bundle or None) with the
         compiled region saved at `path` (inductor's CompiledArtifact, binary format; its FX graph
         and AOTAutograd cache entries are in inductor's on-disk caches too; the bundle is what
         squall_inductor.direct_load loads it from without inductor), or ("error", "Type: message"),
         or ("unsupported", why) where torch.compile cannot run in this Python.
    ("compile_symbolic", payload, SymbolicSpec, config, num_threads, None, path)
      -> ("ok", guard source, None, pickled tensor constants, direct bundle or None), or as above.

The region's FX trace (make_fx, which patches torch.nn.Module.__call__ while it runs) and
inductor's lowering happen here, never in the user's process. With a time budget the region
is also timed here against its torch calls, on the same example inputs.
"""
from __future__ import annotations

import gc
import inspect
import operator
import os
import pickle
import signal
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

import tempfile
from collections.abc import Callable, Sequence

import torch
import torch._inductor.config as inductor_config
from torch._inductor import standalone_compile
from torch._inductor.runtime.cache_dir_utils import temporary_cache_dir
from torch.fx.experimental.proxy_tensor import make_fx

from squall_inductor.choices import best_time
from squall_inductor.direct_build import direct_bundle
from squall_inductor.regions import EAGER_NUMERICS, Layout, examples_for, load_region, output_layouts, views_as_reshapes
from squall_inductor.split_build import side_by_side
from squall_inductor.warm_up import HEADER_AFTER_IDLE_S, WarmUp
from squall_inductor.wrappers import first_that_compiles, wrapper_attempts
from squall_inductor.worker import compile_threads, described, dynamo_unsupported
from squall_inductor.symbolic import SYMBOLIC_CONFIG, SymbolicSpec, compile_symbolically, guards_source, spec_examples
from squall_inductor.timeline import mark


def lift_constants(graph: Any) -> list:
    """Turn the graph's tensor constants (a region's `torch.tensor(...)`, which make_fx keeps as
    attributes) into trailing inputs, and return their values in that order.

    A saved inductor artifact holds the graph's code, not the module's attributes: loaded elsewhere
    it would expect them from its caller anyway (inductor lifts a module's buffers to inputs), so
    they become plain inputs, in a known order, that the loading process passes.
    """
    placeholders = [n for n in graph.graph.nodes if n.op == "placeholder"]
    last = placeholders[-1] if placeholders else None
    constants = []
    for node in [n for n in graph.graph.nodes if n.op == "get_attr"]:
        value = operator.attrgetter(node.target)(graph)
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"the region's graph holds a {type(value).__name__} attribute ({node.target}), not a tensor")
        if last is None:
            with graph.graph.inserting_before(next(iter(graph.graph.nodes))):
                last = graph.graph.placeholder(f"_lifted_constant_{len(constants)}")
        else:
            with graph.graph.inserting_after(last):
                last = graph.graph.placeholder(f"_lifted_constant_{len(constants)}")
        # inductor's C++ wrapper takes its example inputs from the placeholders' fake values
        last.meta["val"] = node.meta.get("val") if node.meta.get("val") is not None else _fake_like(graph, value)
        node.replace_all_uses_with(last)
        graph.graph.erase_node(node)
        for use in list(last.users):
            # make_fx copies a constant where it is used (lift_fresh_copy), a copy of an input now: a
            # plain clone (inductor's C++ wrapper passes no tensor to lift_fresh_copy of an input)
            if use.target is torch.ops.aten.lift_fresh_copy.default:
                use.target = torch.ops.aten.clone.default
        # gone from the module too: compile_fx lifts a module's buffers to inputs, which the artifact
        # loaded elsewhere would then expect from its caller
        graph._buffers.pop(node.target, None)
        if hasattr(graph, node.target):
            delattr(graph, node.target)
        constants.append(value)
    if constants:
        # make_fx's code generator unflattens the inputs it traced (a fixed count): take them flat instead
        graph.graph._codegen = torch.fx.graph.CodeGen()
    graph.recompile()
    return constants


def _compiled(graph: Any, args: list, constants: list, path: str) -> tuple[Callable, bytes | None]:
    """(callable of the inputs, direct bundle): the graph compiled, run once on `args` (a region
    that compiles but cannot run fails here, not in the user's process) and saved at `path`, with
    its direct bundle made under the same settings (its kernels are found built, not built again)."""
    artifact = standalone_compile(graph, [*args, *constants], dynamic_shapes="from_example_inputs", options={})
    mark("worker: lowered and compiled (standalone_compile)")
    compiled = (lambda *a: artifact(*a, *constants)) if constants else artifact
    compiled(*args)
    mark("worker: first run")
    artifact.save(path=path, format="binary")
    bundle, _ = direct_bundle(artifact._compiled_fn, [*args, *constants])
    mark("worker: saved, direct bundle checked")
    return compiled, bundle


def _fake_like(graph: Any, value: torch.Tensor) -> Any:
    """A fake copy of `value` in the fake mode of the graph's other placeholders (none: `value` itself)."""
    fakes = [n.meta.get("val") for n in graph.graph.nodes if n.op == "placeholder"]
    mode = next((f.fake_mode for f in fakes if hasattr(f, "fake_mode")), None)
    return mode.from_tensor(value, static_shapes=True) if mode is not None else value


def compile_static(fn: Callable, layouts: Sequence[Layout], time_budget_s: float | None, path: str,
                   *, one_unit: bool = False) -> tuple[float | None, float | None, list, bytes | None]:
    """(torch_s, inductor_s, constants, direct bundle): `fn` compiled for inputs with these layouts
    and saved at `path`, with what loads it without inductor (squall_inductor.direct_build; None
    where that cannot serve); timed against its torch calls where a budget is given.

    With `one_unit`, a CPU region with matmuls is compiled with inductor's C++ wrapper: the wrapper
    and every kernel in one translation unit, one C++ compiler run (gpt2's whole-model region: 7.6
    against 13.0 s at load 8, one run each), where its Python wrapper compiles each kernel by itself.
    Where a core is spare, the wrapper and its kernels are built as two units side by side
    (squall_inductor.split_build), and as one unit where that fails. Where the C++ wrapper fails,
    and for an island (`is_island`), the region is compiled with the Python wrapper."""
    args = examples_for(layouts)
    graph = views_as_reshapes(make_fx(fn, tracing_mode="fake")(*args))
    constants = lift_constants(graph)
    mark("worker: FX graph traced (make_fx)")

    def compile(settings: dict) -> tuple[Callable, bytes | None]:
        with inductor_config.patch(settings), side_by_side():
            return _compiled(graph, args, constants, path)

    attempts = wrapper_attempts(graph, one_unit, all(torch.device(device).type == "cpu" for *_, device in layouts))
    compiled, bundle = first_that_compiles(attempts, compile)
    torch_s = inductor_s = None
    if time_budget_s:
        device = str(layouts[0][3]) if layouts else "cpu"
        torch_s = best_time(fn, args, device=device, budget_s=time_budget_s)
        inductor_s = best_time(compiled, args, device=device, budget_s=time_budget_s)
    return torch_s, inductor_s, constants, bundle


def _compile_in_shape_env(graph: torch.fx.GraphModule, fakes: list, fake_mode: Any) -> Any:
    """standalone_compile of `graph` for `fakes`, under `fake_mode`'s shape environment (its symbols,
    and the guards the compile adds, are the ones `guards_source` reads). Newer torch (2.13) takes
    the mode as an argument; older (2.10, 2.11) has no such argument, and is handed the mode as
    the tracing context's, which "from_tracing_context" compiles under."""
    if "fake_mode" in inspect.signature(standalone_compile).parameters:
        return standalone_compile(graph, fakes, dynamic_shapes="from_example_inputs", fake_mode=fake_mode, options={})
    with torch._guards.tracing(torch._guards.TracingContext(fake_mode)):
        return standalone_compile(graph, fakes, dynamic_shapes="from_tracing_context", options={})


def compile_symbolic(fn: Callable, spec: SymbolicSpec, path: str, *, one_unit: bool = False) -> tuple[str, list, bytes | None]:
    """(guard source, constants, direct bundle): `fn` compiled for the spec's symbolic sizes and
    saved at `path`, with what loads it without inductor (squall_inductor.direct_build, checked at
    the spec's sizes; None where that cannot serve). Without the bundle the user's process loads a
    symbolic region through inductor, which imports Dynamo and probes the CPU's vector instruction
    sets there: seconds of a background thread holding the interpreter beside the user's calls.

    With `one_unit`, a CPU region with matmuls compiles as `compile_static`'s does: inductor's C++
    wrapper, one compiler run for all its kernels (a llama decoding step's region, about 25 kernels:
    12.6 s of worker CPU, where the Python wrapper's kernel-by-kernel builds took 51 s).

    The compile runs against a fresh, empty inductor cache folder: a cache hit would not put the
    guards it was compiled under into the shape environment (squall_inductor.symbolic), and an
    empty cache still records what the artifact saves."""
    def compile(graph: torch.fx.GraphModule, fakes: list, fake_mode: Any, settings: dict) -> tuple[str, list, bytes | None]:
        with side_by_side():
            return _compiled_symbolic(graph, fakes, fake_mode, spec, path, settings)

    return compile_symbolically(fn, spec, one_unit, compile)


def _compiled_symbolic(graph: torch.fx.GraphModule, fakes: list, fake_mode: Any, spec: SymbolicSpec, path: str,
                       settings: dict) -> tuple[str, list, bytes | None]:
    constants = lift_constants(graph)
    with fake_mode:  # the constants' sizes are static: fake copies of them for the compile
        constant_fakes = [fake_mode.from_tensor(c, static_shapes=True) for c in constants]
    with (
        tempfile.TemporaryDirectory(prefix="squall-inductor-symbolic-") as folder,
        temporary_cache_dir(folder),
        inductor_config.patch({**SYMBOLIC_CONFIG, **settings}),
    ):
        artifact = _compile_in_shape_env(graph, [*fakes, *constant_fakes], fake_mode)
        artifact.save(path=path, format="binary")
        source = guards_source(fake_mode, fakes)
        examples = spec_examples(spec)
        artifact(*examples, *constants)  # a region that compiles but cannot run fails here, not in the user's process
        # made here, where its kernels are found built in the compile's cache folder
        bundle, _ = direct_bundle(artifact._compiled_fn, [*examples, *constants])
    return source, constants, bundle


PARENT_POLL_S = 0.5


def exit_with_parent(parent: int, poll_s: float = PARENT_POLL_S) -> threading.Thread:
    """Start a daemon thread that kills this process, and its group where it leads one (the worker
    leads its own session: the C++ compilers it started go too), once `parent`, the process that
    started it, is gone. A killed user's process leaves a worker in the middle of a compile, which
    the closed socket does not reach until the compile ends: minutes of CPU on a busy machine,
    for nothing."""

    def watch() -> None:
        while os.getppid() == parent:  # an orphan's parent becomes init (or a subreaper)
            time.sleep(poll_s)
        if os.getpgid(0) == os.getpid():
            os.killpg(os.getpid(), signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    thread = threading.Thread(target=watch, name="squall-inductor-parent-watch", daemon=True)
    thread.start()
    return thread


def main(fd: int, started: float | None = None, parent: int | None = None, spare: bool = False) -> None:
    """Serve compile requests on the socket `fd` until it closes (`started`: when the worker's
    interpreter started, seconds since the epoch, for the timeline; `parent`: the user's process,
    whose end this process does not outlive; `spare`: a worker started beside the default one for
    regions compiled side by side, which never builds the precompiled header: cold, that costs
    more than it saves the few regions a spare compiles, and it would hold the core the default
    worker's compile needs)."""
    mark("worker: interpreter started", at=started, cpu=0.0)
    # torch's and inductor's modules, about 440k objects, live as long as the worker: out of the
    # collector's sight, a full collection during a region's lowering costs 30-60 ms, not 200+
    # (gpt2's region: 209 against 28 + 50 ms of CPU). The worker is this process's only user.
    gc.freeze()
    mark("worker: imports done")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the user's process's to handle
    exit_with_parent(os.getppid() if parent is None else parent)
    conn = Connection(fd)
    conn.send(("ready", os.getpid()))
    warm_up = WarmUp()
    warm_up.start()
    unsupported: str | None = None  # why torch.compile cannot run here (worker.dynamo_unsupported), asked at the first request
    while True:
        if not spare and not conn.poll(HEADER_AFTER_IDLE_S):  # idle: the precompiled header, for the compiles after (once)
            warm_up.build_header()
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return  # the user's process closed the socket, or is gone
        kind, payload, shapes, config, num_threads, time_budget_s, path = request
        mark("worker: request received")
        unsupported = dynamo_unsupported() if unsupported is None else unsupported
        if unsupported:  # asked here, not in the user's process: its import is seconds of their interpreter
            reply = ("unsupported", unsupported)
            try:
                conn.send(reply)
            except (EOFError, OSError):
                return
            continue
        try:
            torch.set_num_threads(num_threads)
            fn = load_region(payload)
            # the user's process's inductor settings; compiler processes as compile_threads() allows
            with (inductor_config.patch({**EAGER_NUMERICS, **config.get("changed", {}), "compile_threads": compile_threads()}),
                  inductor_config.patch(output_layouts(fn))):
                one_unit = config.get("environment", {}).get("one unit", False)
                if kind == "compile_symbolic":
                    guards, constants, bundle = warm_up.compile(lambda: compile_symbolic(fn, shapes, path, one_unit=one_unit), on_cpu=shapes.on_cpu)
                    reply: tuple = ("ok", guards, None, pickle.dumps(constants), bundle)
                else:
                    on_cpu = all(device.type == "cpu" for *_, device in shapes)
                    torch_s, inductor_s, constants, bundle = warm_up.compile(
                        lambda: compile_static(fn, shapes, time_budget_s, path, one_unit=one_unit), on_cpu=on_cpu)
                    reply = ("ok", torch_s, inductor_s, pickle.dumps(constants), bundle)
        except Exception as e:  # noqa: BLE001 - any failure is the parent's to report (it falls back to torch)
            reply = ("error", described(e))
        mark("worker: reply ready")
        try:
            conn.send(reply)
        except (EOFError, OSError):
            return

