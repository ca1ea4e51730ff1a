"""Code generation: an execution plan becomes the source of one Python function.

The function unpacks its inputs, calls each executor's implementation in order,
deletes every intermediate after its last use, and returns the output structure.
Its source is registered with `linecache` so tracebacks and debuggers show it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch.utils._pytree import tree_flatten, tree_unflatten

from .proxies import TensorProxy, type_string
from .symbol import BoundSymbol
from .sources import load_source
from .trace import ValuePrinter

__all__ = ["InputBinding", "generate", "GeneratedFunction", "load_source"]


@dataclass(frozen=True)
class InputBinding:
    """Where an input proxy comes from: a path of indexes into the function's arguments.

    The path starts at "params" (a module's parameters and buffers, a list),
    "args" (positional arguments, a tuple) or "kwargs" (a dict).
    """

    proxy: TensorProxy
    path: tuple  # e.g. ("args", 1, "k")


@dataclass
class GeneratedFunction:
    fn: Callable
    source: str
    filename: str


def _output_expression(output: Any, printer: ValuePrinter) -> str:
    # Plain containers print as literals; anything else is rebuilt from its pytree spec.
    def literal(x) -> bool:
        if isinstance(x, (TensorProxy, bool, int, float, complex, str)) or x is None:
            return True
        if type(x) in (tuple, list):
            return all(literal(v) for v in x)
        if type(x) is dict:
            return all(isinstance(k, (str, int)) and literal(v) for k, v in x.items())
        return False

    if literal(output):
        return printer(output)
    leaves, spec = tree_flatten(output)
    unflatten = printer.name_for(tree_unflatten, "tree_unflatten")
    return f"{unflatten}({printer(leaves)}, {printer.name_for(spec, 'output_spec')})"


def generate(
    name: str,
    bindings: list[InputBinding],
    bsyms: list[BoundSymbol],
    output: Any,
    constants: dict[str, Any],
    *,
    takes_params: bool,
    nargs: int,
    takes_kwargs: bool,
) -> GeneratedFunction:
    """Python source and callable for `bsyms`, with executor implementations bound as globals."""
    local_names = {b.proxy.name for b in bindings} | {p.name for bsym in bsyms for p in bsym.output_proxies()}
    printer = ValuePrinter(dict(constants), reserved=local_names | {"params", "kwargs"})
    # Positional arguments are parameters of the generated function, named after the input
    # they carry; parameters and buffers unpack from one list; the rest is reached by index.
    positional: dict[int, str] = {b.path[1]: b.proxy.name for b in bindings if b.path[0] == "args" and len(b.path) == 2}
    params = [b.proxy.name for b in bindings if b.path[0] == "params"]
    signature = (["params"] if takes_params else []) + [positional.get(i, f"_a{i}") for i in range(nargs)]
    lines = [f"def {name}({', '.join(signature + (['**kwargs'] if takes_kwargs else []))}):"]
    if params:
        lines.append(f"  {', '.join(params)}, = params")
    for b in bindings:
        if b.path[0] == "args" and len(b.path) == 2:
            continue
        if b.path[0] == "args":
            access = f"_a{b.path[1]}" + "".join(f"[{printer(k)}]" for k in b.path[2:])
        elif b.path[0] == "kwargs":
            access = "kwargs" + "".join(f"[{printer(k)}]" for k in b.path[1:])
        else:
            continue
        lines.append(f"  {b.proxy.name} = {access}")
    for b in bindings:
        lines.append(f'  # {b.proxy.name}: "{type_string(b.proxy)}"')

    impl_names: dict[int, str] = {}
    for bsym in bsyms:
        if id(bsym.impl) not in impl_names:
            impl_names[id(bsym.impl)] = printer.name_for(bsym.impl, f"{bsym.executor.name}_{bsym.sym.name}")

    # last use of every name, so intermediates are freed as soon as possible
    returned = {p.name for p in tree_flatten(output)[0] if isinstance(p, TensorProxy)}
    last_use: dict[str, int] = {}
    for i, bsym in enumerate(bsyms):
        for p in bsym.input_proxies():
            last_use[p.name] = i
    for i, bsym in enumerate(bsyms):
        target, picks = printer.assignment(bsym.output) if bsym.output is not None else ("", [])
        lines.append(f"  {target + ' = ' if target else ''}{printer.call(impl_names[id(bsym.impl)], bsym)}")
        lines.extend(f"  {line}" for line in picks)
        outs = bsym.output_proxies()
        dead = sorted(
            {p.name for p in bsym.input_proxies() if last_use.get(p.name) == i and p.name not in returned and p.name not in constants}
            | {p.name for p in outs if p.name not in last_use and p.name not in returned}
        )
        if dead:
            lines.append(f"  del {', '.join(dead)}")
    lines.append(f"  return {_output_expression(output, printer)}")
    source = "\n".join(lines) + "\n"
    filename = load_source(source, f"generated-{name}", printer.globals)
    return GeneratedFunction(printer.globals[name], source, filename)
