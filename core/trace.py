"""Trace: a program as an ordered list of bound symbols, printable as Python.

A traced trace prints each torch-language call with its decomposition below it as
comments, down to prims; every line carries the result's device, dtype and shape.
"""
from __future__ import annotations

import collections
import itertools
import keyword
import math
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import SUPPORTED_NODES, MappingKey, _get_node_type, SequenceKey, is_structseq_instance, tree_flatten, tree_flatten_with_path, tree_unflatten

from .proxies import NumberProxy, TensorProxy, size_leaf, type_string, real_tensor
from .symbolic import SymInt, source
from .symbol import DEL, BoundSymbol, Tags

__all__ = ["Trace", "ValuePrinter", "plain_scalar", "Itself", "Reached", "route_source", "route_value", "pytree_container", "container_items", "rebuilt_container"]


class Itself:
    """A container in a program's output or side effects that is the caller's own object (a
    dict the program closes over and writes into): the generated code gives that very object,
    never a container rebuilt from its items, as eager gives it."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __repr__(self) -> str:
        return f"Itself({type(self.obj).__name__} at {id(self.obj):#x})"


class Reached:
    """An object in a program's output that the call gave it (a KV cache passed in, updated and
    returned): argument objects are keyed by type and layout, not identity, so the generated
    code reaches the call's own object through `route` (`route_source`), never a constant."""

    __slots__ = ("obj", "route")

    def __init__(self, obj: Any, route: tuple):
        self.obj = obj
        self.route = route

    def __repr__(self) -> str:
        return f"Reached({type(self.obj).__name__} at {route_source(self.route, lambda i: f'args[{i}]')})"


def route_source(route: tuple, positional: Callable[[int], str]) -> str:
    """Python source reaching an object through a call's arguments. `route` is ("args", i) or
    ("kwargs", name), then steps: ("attr", name) reads the object's `__dict__[name]`,
    ("item", k) indexes a list, tuple or dict; `positional(i)` is the source of argument i."""
    root, first, *steps = route
    text = positional(first) if root == "args" else f"kwargs[{plain_scalar(first)!r}]"
    for how, k in steps:
        text += f".__dict__[{plain_scalar(k)!r}]" if how == "attr" else f"[{plain_scalar(k)!r}]"
    return text


def route_value(route: tuple, args: tuple, kwargs: dict, offset: int = 0) -> Any:
    """The object `route` reaches in a call's arguments (`offset`: leading arguments before the
    call's own, a module's parameters); raises KeyError, IndexError or AttributeError where
    the call's objects have no such place."""
    root, first, *steps = route
    x = args[first + offset] if root == "args" else kwargs[first]
    for how, k in steps:
        x = x.__dict__[k] if how == "attr" else x[k]
    return x


def pytree_container(x: Any) -> bool:
    """Whether `x` is a container squall reads as torch's pytree flattens it, beyond the plain
    list, tuple and dict it walks itself: a namedtuple or torch's structseq (a `torch.max`
    result), a dict subclass torch's pytree knows (OrderedDict, defaultdict, transformers'
    `ModelOutput`: a decoder's `encoder_outputs`), a deque. As an argument its tensors are
    inputs of the program, keyed by their metadata, never constants of it (they were: a second
    call with new values got the first call's result)."""
    t = type(x)
    if t is tuple or t is dict or t is list or not isinstance(x, (tuple, dict, collections.deque)):
        return False
    return _get_node_type(x) in SUPPORTED_NODES


def container_items(x: Any) -> list[tuple[Any, Any]]:
    """A `pytree_container`'s children with the subscript that reads each (`x[key]`): a dict's
    keys, else positions; in the order its pytree flattening gives them."""
    children, _ = SUPPORTED_NODES[_get_node_type(x)].flatten_fn(x)
    keys = list(x.keys()) if isinstance(x, dict) else range(len(children))
    if len(keys) != len(children):
        raise TypeError(f"squall: a {type(x).__name__} argument flattens to {len(children)} items for its {len(keys)} keys, so squall cannot read its items by key")
    return list(zip(keys, children))


def rebuilt_container(x: Any, children: list) -> Any:
    """A new container like the `pytree_container` `x` (its type, a defaultdict's factory, a
    deque's maxlen) holding `children`, as torch's pytree rebuilds it."""
    node = SUPPORTED_NODES[_get_node_type(x)]
    return node.unflatten_fn(children, node.flatten_fn(x)[1])


# Scalars whose `repr` is the builtin's own: a literal of one of these types is safe source.
_PLAIN_SCALARS = (bool, int, float, complex, str)


def scalar_key(x: float | complex) -> Any:
    """A float or complex as a value that tells apart what == conflates: -0.0 == 0.0 (yet
    1 / -0.0 is -inf), NaN != NaN (so a NaN would never match itself), and a complex's signed
    zero parts. Its repr tells them apart exactly, one NaN as one; any other float is itself."""
    return repr(x) if type(x) is complex or x != x or x == 0 else x


def plain_scalar(x: Any) -> Any:
    """`x` as the plain built-in value it stands for: an IntEnum member as its int, a float
    subclass as its float, a str subclass as its str (others are returned unchanged).

    Only the base class's own methods are called, so a subclass's `__repr__`, `__str__`,
    `__int__` or `__float__` never runs.
    """
    t = type(x)
    if t in _PLAIN_SCALARS or not isinstance(x, _PLAIN_SCALARS):
        return x
    if isinstance(x, int):  # bool cannot be subclassed, so this is an int subclass
        return int.__int__(x)
    if isinstance(x, float):
        return float.__float__(x)
    if isinstance(x, complex):
        return complex.__complex__(x)
    return str.__str__(x)


def _identifier(hint: str, fallback: str) -> str:
    # ASCII only: Python folds other identifier characters (NFKC), so a fullwidth "ｔｏｒｃｈ"
    # in source would name the global `torch`, and some letters and digits that
    # str.isalnum() accepts are not identifier characters at all
    base = "".join(c if (c.isascii() and c.isalnum()) or c == "_" else "_" for c in hint[:48]).lstrip("_") or fallback
    return "_" + base if base[0].isdigit() else base


class ValuePrinter:
    """Prints argument values as Python source; what has no literal form becomes a named global.

    Source is made only of names generated here and literals of exact built-in types
    (`bool`, `int`, `float`, `complex`, `str`, `None`, and tuples, lists, dicts, slices of
    them), printed by the built-in types' own `repr`. A subclass of a built-in scalar passed
    to an operation is printed as the plain value it stands for (an `IntEnum` dim as its
    int); where the object itself must survive (a dict key, a value the program returns) it
    is referenced by a generated name. No object's own `repr` ever reaches the source.
    """

    def __init__(self, globals_: dict[str, Any] | None = None, reserved: set[str] = frozenset()):
        self.globals = globals_ if globals_ is not None else {}
        self.reserved = reserved  # local names the generated function uses
        # the source of positional argument i where the generated function takes the call's
        # arguments (None: it does not, and an output the call gave cannot be reached: `Reached`)
        self.positional: Callable[[int], str] | None = None
        self._named: dict[int, str] = {}
        self._temps = itertools.count()

    def name_for(self, obj: Any, hint: str) -> str:
        """A global name bound to `obj` (one per object), built from a sanitized hint."""
        key = id(obj)
        if key in self._named:
            return self._named[key]
        base = _identifier(hint, "obj")
        name, n = base, 1
        while name in self.globals or name in self.reserved or keyword.iskeyword(name):
            name = f"{base}_{n}"
            n += 1
        self.globals[name] = obj
        self._named[key] = name
        return name

    def __call__(self, x: Any) -> str:
        """`x` as an argument of an operation: equal in value, not necessarily the same object."""
        if isinstance(x, (TensorProxy, NumberProxy)):
            return x.name
        t = type(x)
        if t is SymInt:
            return source(x)  # an expression over the size symbols the generated function reads
        if x is None or t is bool or t is int or t is str:
            return repr(x)
        if x is Ellipsis:
            return "..."
        if t is float:
            if math.isnan(x):
                return "float('nan')"
            if math.isinf(x):
                return "float('inf')" if x > 0 else "-float('inf')"
            return repr(x)
        if t is complex:
            return f"complex({self(x.real)}, {self(x.imag)})"
        if isinstance(x, _PLAIN_SCALARS):
            return self(plain_scalar(x))
        if t is torch.dtype or t is torch.memory_format or t is torch.layout:
            self.globals["torch"] = torch
            return str(x)
        if t is torch.device:
            self.globals["torch"] = torch
            return f"torch.device({str(x)!r})"
        if t is slice:
            return f"slice({self(x.start)}, {self(x.stop)}, {self(x.step)})"
        # a torch.return_types result (values, indices) unpacks like the tuple it is
        if t is torch.Size:  # stays a torch.Size: `x.new(size)` reads a tuple as values
            self.globals["torch"] = torch
            return f"torch.Size([{', '.join(self(v) for v in x)}])"
        if t is tuple or is_structseq_instance(x):
            inner = ", ".join(self(v) for v in x)
            return f"({inner},)" if len(x) == 1 else f"({inner})"
        if t is list:
            return f"[{', '.join(self(v) for v in x)}]"
        if t is dict:
            return "{" + ", ".join(f"{self.exact(k)}: {self(v)}" for k, v in x.items()) + "}"
        return self.name_for(x, f"_k_{t.__name__}")

    def exact(self, x: Any) -> str:
        """`x` as the very object: a literal where it is of an exact built-in type, else a name.

        For dict keys (an `Enum` key hashes and compares as itself, not as its value) and
        for values the program returns (the caller gets what eager returns, type included).
        """
        t = type(x)
        if isinstance(x, (TensorProxy, NumberProxy)) or x is None or x is Ellipsis or t in _PLAIN_SCALARS or t is SymInt:
            return self(x)
        if t is tuple or t is list:
            inner = ", ".join(self.exact(v) for v in x)
            if t is list:
                return f"[{inner}]"
            return f"({inner},)" if len(x) == 1 else f"({inner})"
        if t is dict:
            return "{" + ", ".join(f"{self.exact(k)}: {self.exact(v)}" for k, v in x.items()) + "}"
        if t is Itself:
            return self.name_for(x.obj, f"_k_{type(x.obj).__name__}")
        if t is Reached:
            if self.positional is None:
                raise NotImplementedError(
                    f"squall: the program returns the {type(x.obj).__name__} object it was given, from a function "
                    "that does not receive the call's arguments (a differentiated forward)"
                )
            return route_source(x.route, self.positional)
        return self.name_for(x, f"_k_{t.__name__}")

    def assignment(self, output: Any) -> tuple[str, list[str]]:
        """A target to assign a call's `output` to, and statements picking out what it cannot unpack.

        Tuples and lists unpack in place, with `_` for their non-tensor entries (an op may
        return `(out, None)`); a dict or another structure holding proxies is bound to a
        temporary first and indexed.
        """
        if isinstance(output, (TensorProxy, NumberProxy)):
            return output.name, []
        if type(output) in (tuple, list) or is_structseq_instance(output):
            parts, extra = zip(*(self.assignment(v) for v in output)) if len(output) else ((), ())
            inner = ", ".join(parts)
            return (f"({inner},)" if len(parts) == 1 else f"({inner})"), [s for e in extra for s in e]
        leaves, _ = tree_flatten_with_path(output)
        picks = [(path, v) for path, v in leaves if isinstance(v, (TensorProxy, NumberProxy))]
        if not picks:
            return "_", []
        temp = f"_r{next(self._temps)}"  # no other generated name starts with _r
        lines = []
        for path, v in picks:
            access = temp
            for k in path:
                if isinstance(k, MappingKey):
                    access = f"{access}[{self.exact(k.key)}]"
                elif isinstance(k, SequenceKey):
                    access = f"{access}[{k.idx}]"
                else:
                    access = f"getattr({access}, {self(k.name)})"
            lines.append(f"{v.name} = {access}")
        return temp, lines + [f"del {temp}"]

    def output(self, output: Any) -> str:
        """A program's output as an expression: a literal of its plain containers, else its
        pytree leaves rebuilt by its spec (named tuples, ModelOutputs, objects squall rebuilds)."""
        if _literal_output(output):
            return self.exact(output)
        leaves, spec = tree_flatten(output, is_leaf=size_leaf)
        return f"{self.name_for(tree_unflatten, 'tree_unflatten')}({self.exact(leaves)}, {self.name_for(spec, 'output_spec')})"

    def call(self, callee: str, bsym: BoundSymbol) -> str:
        args, kwargs = bsym.shortest_arguments()
        parts = [self(a) for a in args]
        plain = {k: v for k, v in kwargs.items() if _is_keyword_name(k)}
        parts += [f"{k}={self(v)}" for k, v in plain.items()]
        if len(plain) < len(kwargs):
            # a keyword that is not a plain identifier (an op taking **kwargs) is passed by dict
            rest = {k: v for k, v in kwargs.items() if k not in plain}
            parts.append(f"**{self(rest)}")
        return f"{callee}({', '.join(parts)})"


def _literal_output(x: Any) -> bool:
    # Plain containers print as literals; anything else is rebuilt from its pytree spec. Every
    # non-tensor value is the very object eager would return (ValuePrinter.exact), so an Enum
    # stays an Enum and a float subclass its subclass.
    if isinstance(x, (TensorProxy, NumberProxy)) or x is None or type(x) in _PLAIN_SCALARS or size_leaf(x):
        return True
    if type(x) in (tuple, list):
        return all(_literal_output(v) for v in x)
    if type(x) is dict:
        return all(_literal_output(v) for v in x.values())
    return False


def _is_keyword_name(k: Any) -> bool:
    return type(k) is str and k.isascii() and k.isidentifier() and not keyword.iskeyword(k)


def _annotation(bsym: BoundSymbol) -> str:
    outs = bsym.output_proxies()
    if not outs:
        return ""
    return "  # " + ", ".join(f'{p.name}: "{type_string(p)}"' for p in outs)


def _targets(bsym: BoundSymbol, printer: ValuePrinter) -> str:
    if bsym.output is None:
        return ""
    return printer.assignment(bsym.output)[0] + " = "


def default_callee(bsym: BoundSymbol) -> str:
    """How a trace names the callee: `ltorch.softmax`, `prims.exp`, or after planning the
    executor's name (`torch.softmax`, `inductor.region`)."""
    if bsym.executor is not None:
        return f"{bsym.executor.name}.{bsym.sym.name}"
    family = bsym.sym.id.split(".", 1)[0]
    return f"{family if family in ('prims', 'squall') else 'ltorch'}.{bsym.sym.name}"


_SAME = object()


class Trace:
    """A program at one stage of compilation: named inputs, bound symbols in order, an output pytree.

    A stage never edits the trace it was given: it builds a new one (`from_trace`) whose
    `provenance` says what made it ("planned for inductor, torch"). A planned trace's
    bound symbols each name their executor, and `plan` holds the planner's decisions.
    """

    def __init__(
        self,
        name: str,
        inputs: list[TensorProxy],
        bsyms: list[BoundSymbol],
        output: Any,
        *,
        constants: dict[str, Any] | None = None,
        context: Any = None,
        provenance: str = "",
        plan: Any = None,
    ):
        self.name = name
        self.inputs = inputs
        self.bsyms = bsyms
        self.output = output
        self.constants = constants or {}
        self.context = context  # the TracingContext that made it; planning keeps naming from it
        self.provenance = provenance
        self.plan = plan  # the planner's decisions (squall.compiler.planner.Plan), on planned traces

    @classmethod
    def from_trace(cls, trace: Trace, *, bsyms: list[BoundSymbol], provenance: str, output: Any = _SAME, plan: Any = _SAME) -> Trace:
        """The next stage of `trace`: same inputs, constants and naming, new calls and provenance."""
        return cls(
            trace.name,
            list(trace.inputs),
            bsyms,
            trace.output if output is _SAME else output,
            constants=trace.constants,
            context=trace.context,
            provenance=provenance,
            plan=trace.plan if plan is _SAME else plan,
        )

    def python(self, *, decompositions: bool | None = None, callee: Callable[[BoundSymbol], str] = default_callee) -> str:
        """The trace as Python source, headed by its provenance.

        Each call is followed by its decomposition as comments (by default: before
        planning every decomposition, after it only fusion regions' members).
        """
        printer = ValuePrinter()
        # an object the call gave, shown as where it is reached (a shown trace is no program:
        # `args[i]` names the call's argument i, as Reached's repr does)
        printer.positional = lambda i: f"args[{i}]"
        lines = [f"# {self.provenance}"] if self.provenance else []
        lines.append(f"def {self.name}({', '.join(p.name for p in self.inputs)}):")
        for p in self.inputs:
            lines.append(f'  # {p.name}: "{type_string(p)}"')
        for name, value in self.constants.items():
            if real_tensor(value):
                lines.append(f'  # {name}: "{value.device} {value.dtype}{list(value.shape)}" (a captured constant)')
        roots = getattr(self.context, "grad_roots", None)
        if roots:  # (squall.frontend.grad_roots)
            lines.append(f"  # made to require grad by the program (x.requires_grad = True), a gradient starts at: {', '.join(sorted(roots))}")

        def emit(bsym: BoundSymbol, depth: int) -> None:
            if bsym.sym is DEL:
                text = f"del {', '.join(printer(p) for p in bsym.args)}"
            else:
                text = f"{_targets(bsym, printer)}{printer.call(callee(bsym), bsym)}{_annotation(bsym)}"
            lines.append("  " + ("  " * depth + "# " if depth else "") + text)
            show = decompositions if decompositions is not None else (self.plan is None or Tags.FUSION_REGION in bsym.sym.tags)
            if show:
                for sub in bsym.subsymbols:
                    emit(sub, depth + 1)

        for bsym in self.bsyms:
            emit(bsym, 0)
        lines.append(f"  return {printer.output(self.output)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.python()

    def __repr__(self) -> str:
        return f"<Trace {self.name}: {len(self.bsyms)} calls ({self.provenance or 'no provenance'})>"
