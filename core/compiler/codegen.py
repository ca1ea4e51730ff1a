"""Code generation: an execution trace becomes the source of one Python function.

The function unpacks its inputs, calls each executor's implementation in the trace's
order (deleting what the trace's `del`s name), and returns the output structure. Its
source is registered with `linecache` so tracebacks and debuggers show it.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..frontend.tracing import InputBinding
from ..guards import GuardFailed
from ..proxies import symbol_reads, type_string
from ..sources import load_source
from ..symbol import DEL, BoundSymbol, flat_proxies
from ..symbolic import SymInt, size_read, symbols_of
from ..symshape import SymShape
from ..trace import Trace, ValuePrinter, route_source

__all__ = ["generate", "GeneratedFunction", "UnassignedName", "load_source"]


class UnassignedName(RuntimeError):
    """An internal error: an execution trace reads a name no earlier line assigns (or one a
    `del` freed). Raised while generating, so it never becomes code that fails when it runs."""


@dataclass
class GeneratedFunction:
    """A generated function, its source, and the generated functions it calls (forward, backward)."""

    fn: Callable
    source: str
    filename: str
    parts: dict[str, GeneratedFunction] = field(default_factory=dict)


def generate(
    trace: Trace,
    bindings: list[InputBinding],
    *,
    takes_params: bool,
    nargs: int,
    takes_kwargs: bool,
    wrap: Callable[[BoundSymbol], Callable | None] | None = None,
    consumes_params: bool = False,
    shape_guards: bool = False,
    call_arguments: bool = True,
) -> GeneratedFunction:
    """Python source and callable for an execution trace, with executor implementations bound as globals.

    `bindings` say where each input comes from in the call (`params`, a module's parameters
    and buffers, when `takes_params`; `nargs` positional arguments; keyword arguments when
    `takes_kwargs`). `wrap`, where given, may return a stand-in for a call's implementation
    (each call its own: `squall.compiler.checking.checked_call`), which the code then calls instead.
    `consumes_params`: the function empties the `params` list it is given once it has unpacked
    it, so a tensor is freed at its `del`, not held by the caller's list until the call returns
    (a backward's saved tensors). The size symbols the calls use (`squall.symbolic`) are read
    from the inputs' shapes first; with `shape_guards` (the program's own entry function) the
    shape relations its trace relied on are checked next, in one expression that raises
    `GuardFailed` where one does not hold. `call_arguments`: the function takes the call's own
    arguments (not a differentiated forward's or backward's tensors), so an object the call
    gave is reached through them (squall.trace.Reached).
    """
    name, bsyms, output, constants = trace.name, trace.bsyms, trace.output, trace.constants
    local_names = {b.proxy.name for b in bindings} | {p.name for bsym in bsyms for p in bsym.output_proxies()}
    printer = ValuePrinter(dict(constants), reserved=local_names | {"params", "kwargs"})
    # Positional arguments are parameters of the generated function, named after the input
    # they carry; parameters and buffers unpack from one list; the rest is reached by index.
    positional: dict[int, str] = {b.path[1]: b.proxy.name for b in bindings if b.path[0] == "args" and len(b.path) == 2}
    params = [b.proxy.name for b in bindings if b.path[0] == "params"]
    signature = (["params"] if takes_params else []) + [positional.get(i, f"_a{i}") for i in range(nargs)]
    lines = [f"def {name}({', '.join(signature + (['**kwargs'] if takes_kwargs else []))}):"]
    # an object the call gave, reached through its arguments (squall.trace.Reached), where this
    # function takes them: a forward that takes only tensors (a differentiated program) does not
    offset = 1 if takes_params else 0

    def positional_source(i: int) -> str:
        if i + offset >= len(signature):
            raise NotImplementedError(f"squall: {name} does not take argument {i}, which the program reads an object of")
        return signature[i + offset]

    printer.positional = positional_source if call_arguments else None
    if params:
        lines.append(f"  {', '.join(params)}, = params")
        if consumes_params:
            lines.append("  params.clear()")
    for b in bindings:
        if b.path[0] == "args" and len(b.path) == 2:
            continue
        if b.path[0] == "args":
            access = f"_a{b.path[1]}" + "".join(f"[{printer.exact(k)}]" for k in b.path[2:])
        elif b.path[0] == "kwargs":
            access = "kwargs" + "".join(f"[{printer.exact(k)}]" for k in b.path[1:])
        elif b.path[0] == "state" and b.path[3] is not None:
            access = route_source(b.path[3], positional_source)
        elif b.path[0] == "state":
            access = f"{printer.name_for(b.path[1], 'state')}[{printer.exact(b.path[2])}]"
        else:
            continue
        lines.append(f"  {b.proxy.name} = {access}")
    for b in bindings:
        lines.append(f'  # {b.proxy.name}: "{type_string(b.proxy)}"')
    lines.extend(_size_prologue(trace, bindings, bsyms, output, printer, shape_guards))

    impl_names: dict[int, str] = {}  # id(impl) -> its global name
    stand_ins: dict[int, str] = {}  # id(bsym) -> the global name of its wrapped implementation
    for bsym in bsyms:
        if bsym.sym is DEL:
            continue
        stand_in = wrap(bsym) if wrap is not None else None
        if stand_in is not None:
            stand_ins[id(bsym)] = printer.name_for(stand_in, f"checked_{bsym.executor.name}_{bsym.sym.name}")
        elif id(bsym.impl) not in impl_names:
            impl_names[id(bsym.impl)] = printer.name_for(bsym.impl, f"{bsym.executor.name}_{bsym.sym.name}")
    # every name a line reads is an input, a captured constant, or assigned by an earlier line
    # and not freed since: a trace out of order (a call recorded with a value made later) is
    # an error here, not an UnboundLocalError when the program runs
    assigned = {b.proxy.name for b in bindings} | set(constants)
    freed: set[str] = set()
    for bsym in bsyms:
        if bsym.sym is DEL:
            line = f"del {', '.join(p.name for p in bsym.args)}"
            _check_reads(name, line, bsym.args, assigned, freed, None)
            freed.update(p.name for p in bsym.args)
            assigned.difference_update(p.name for p in bsym.args)
            lines.append(f"  {line}")
            continue
        callee = stand_ins.get(id(bsym)) or impl_names[id(bsym.impl)]
        target, picks = printer.assignment(bsym.output) if bsym.output is not None else ("", [])
        line = f"{target + ' = ' if target else ''}{printer.call(callee, bsym)}"
        _check_reads(name, line, bsym.input_proxies(), assigned, freed, bsym)
        assigned.update(p.name for p in bsym.output_proxies())
        lines.append(f"  {line}")
        lines.extend(f"  {line}" for line in picks)
    line = f"return {printer.output(output)}"
    _check_reads(name, line, flat_proxies(output), assigned, freed, "the return")
    lines.append(f"  {line}")
    source = "\n".join(lines) + "\n"
    filename = load_source(source, f"generated-{name}", printer.globals)
    return GeneratedFunction(printer.globals[name], source, filename)


def _size_prologue(trace: Trace, bindings: list[InputBinding], bsyms: list[BoundSymbol], output: Any, printer: ValuePrinter, shape_guards: bool) -> list[str]:
    """Lines that read each size symbol from an input dimension that is exactly that symbol,
    then (with `shape_guards`) check the trace's shape guards."""
    env = getattr(trace.context, "shapes", None)
    if env is None or not env.symbols:
        return []
    readers = {symbol: f"{bindings[i].proxy.name}.shape[{d}]" for symbol, (i, d) in symbol_reads([b.proxy for b in bindings]).items()}
    inputs = {b.proxy.name for b in bindings}
    for symbol, (_, input_name, dim) in env.symbols.items():
        # an int (an argument, or one an argument object holds), read as a binding: the size itself;
        # a function it is no input of (a backward) reads it from a tensor dimension that carries it
        if dim is None and input_name in inputs:
            readers[symbol] = size_read(input_name, dim, symbol in env.negated)  # (the tensor dimensions that alias it are checked against it)
    used: set[str] = set()
    for bsym in bsyms:
        used |= _symbols_in((bsym.args, bsym.kwargs))
    used |= _symbols_in(output)
    check = env.check_source() if shape_guards else ""
    if check:
        used |= set(env.symbols)
    missing = sorted(used - readers.keys())
    if missing:
        raise NotImplementedError(
            f"squall: the generated function {trace.name} computes with the size symbols {', '.join(missing)}, "
            "which none of its inputs carries as a dimension"
        )
    lines = [f"  {name} = {readers[name]}" for name in sorted(used, key=lambda n: int(n[1:]))]
    if check:
        failed = printer.name_for(GuardFailed, "GuardFailed")
        lines.append(f"  if not ({check}):")
        lines.append(f"    raise {failed}('shape', 'shape guards', True, False)")
    return lines


def _symbols_in(values: Any) -> set[str]:
    found: set[str] = set()
    stack = [values]
    while stack:
        x = stack.pop()
        t = type(x)
        if t is SymInt:
            found |= symbols_of(x)
        elif t in (list, tuple) or t is slice or t is SymShape:  # (a shape the program returns)
            stack.extend((x.start, x.stop, x.step) if t is slice else x)
        elif t is dict:
            stack.extend(x.values())
    return found


def _check_reads(function: str, line: str, reads, assigned: set[str], freed: set[str], reader: BoundSymbol | str | None) -> None:
    """Raise UnassignedName where a name in `reads` is not assigned at this line; `reader` is the
    call that reads them (a bound symbol), "the return", or None for a `del`."""
    for p in reads:
        if p.name not in assigned:
            if isinstance(reader, BoundSymbol):
                executor = reader.executor.name if reader.executor is not None else "none"
                reader = f"{reader.sym.id} (executor {executor})"
            when = "after a del freed it" if p.name in freed else "before any line assigns it"
            raise UnassignedName(
                f"squall internal error: in generated function {function}, {reader or 'del'} reads {p.name} "
                f"{when}: `{line}`. Please report it (`squall rage` makes a report)."
            )
