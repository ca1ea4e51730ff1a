"""Proxies: the stand-ins for tensors while a program is traced.

A `TensorProxy` carries only metadata (shape, dtype, device, requires_grad) and a
name. Every torch call on it is routed to the active tracing context (`squall.frontend.tracing`), which maps
it onto the torch language (`squall.ltorch`) and records it. It is a torch.Tensor without data
(a wrapper subclass, as torch's own tensor subclasses are), so that any code's `isinstance`,
`torch.is_tensor` and torch.Tensor's unbound methods take it as a tensor with nothing
replaced process-wide (issue 22); squall's own checks for a tensor with data use `real_tensor`.
A call below torch's Python API that reaches one (`__torch_dispatch__`: torch.func's vmap
unwrapping its batched tensors) is `BelowPythonAPI`: that call runs eagerly.

A `NumberProxy` stands for a Python int or float read at run time: a number argument whose
value changed between calls while the rest of the call stayed the same (`squall.jit` then
makes it dynamic: keyed by type, passed to the generated function), or a tensor value read
by `.item()` that kept changing (`squall.frontend.speculation`). Arithmetic on it is recorded
(`squall.prims.numbers`), and elementwise torch ops take it as a run-time scalar
(`x * s`, `torch.add(x, s, alpha=s)`); its Python type decides type promotion, as the
number's own would. Anything that needs its concrete value (`int(s)` for a shape,
`if s > 0:`, an op that takes only constants, such as a `dim`) reads the value of the
call being traced and records a guard on it (`squall.ltorch.numbers`): the program is then
specialised on that read, checked at every call. Other numbers (bools, and numbers whose
value has not changed) are constants of the trace, and a compiled function is specialised
on their values.
"""
from __future__ import annotations

import contextvars
import math
import operator
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from .proxy_methods import install_tensor_methods
from .symbolic import BelowPythonAPI, SizeBelowPythonAPI, SymInt, lone_symbol, source
from .symshape import SymShape, as_shape

__all__ = [
    "ABSENT",
    "BelowPythonAPI",
    "SizeBelowPythonAPI",
    "TensorProxy",
    "NumberProxy",
    "current_context",
    "tracing",
    "short_dtype",
    "type_string",
    "size_leaf",
    "real_tensor",
    "symbol_reads",
    "symbol_values",
]


_current: contextvars.ContextVar[Any] = contextvars.ContextVar("squall_tracing", default=None)


def current_context() -> Any:
    """The tracing context in force (a `squall.frontend.tracing.TracingContext`), or None outside tracing."""
    return _current.get()


@contextmanager
def tracing(ctx: Any) -> Iterator[Any]:
    """Make `ctx` the context that proxies and symbols record into."""
    token = _current.set(ctx)
    try:
        yield ctx
    finally:
        _current.reset(token)


def real_tensor(x: Any) -> bool:
    """Whether `x` is a tensor with data: a torch.Tensor that is not a TensorProxy (a proxy is a
    torch.Tensor too, so that every `isinstance` check answers for it as for a tensor)."""
    return isinstance(x, torch.Tensor) and type(x) is not TensorProxy


def size_leaf(x: Any) -> bool:
    """Whether `x` is a torch.Size of plain ints, which squall's pytree walks keep as one leaf:
    torch registers torch.Size as a node that rebuilds as a plain tuple (torch.fx), and a size
    passed on as a tuple changes meaning (`x.new(size)` makes a 1-D tensor of the sizes)."""
    return type(x) is torch.Size and all(type(i) is int for i in x)


def symbol_reads(values: Any, *, sizes: bool = False) -> dict[str, tuple[int, int | None]]:
    """Where a call's arguments hold each size symbol, so that its value in any call can be read
    from that call's arguments (`symbol_values`): symbol -> (index in `values`, dimension) for the
    first tensor proxy with the symbol alone as a dimension (`t.shape[1]` is `s0`), and, with
    `sizes`, (index, None) for a value that is the symbol itself (a size passed as an argument).
    A symbol no value holds so is absent."""
    reads: dict[str, tuple[int, int | None]] = {}
    for i, v in enumerate(values):
        if isinstance(v, TensorProxy):
            for d, n in enumerate(v.shape):
                symbol = lone_symbol(n)
                if symbol is not None:
                    reads.setdefault(symbol, (i, d))
        elif sizes and lone_symbol(v) is not None:
            reads.setdefault(lone_symbol(v), (i, None))
    return reads


def symbol_values(reads: dict[str, tuple[int, int | None]], values: Any) -> dict[str, int | None]:
    """Each symbol's value in this call, read from the call's `values` where `symbol_reads` found
    it; None where this call's value there is not a tensor (or, for a size, not an int), or the
    call has fewer values."""
    found: dict[str, int | None] = {}
    for symbol, (i, d) in reads.items():
        v = values[i] if i < len(values) else None
        found[symbol] = int(v.shape[d]) if d is not None and real_tensor(v) else v if d is None and type(v) is int else None
    return found


def _asked_by_the_program(depth: int) -> bool:
    """Whether the code `depth` frames above the caller is the traced program's own (or a
    library's), not torch's or squall's, while a program is traced."""
    caller = sys._getframe(depth + 1).f_globals.get("__name__", "")
    return _current.get() is not None and not (caller == "torch" or caller.startswith(("torch.", "squall")))


def _text_for_the_program(proxy: TensorProxy) -> str:
    """A traced tensor's text (`tensor([1., 2.])`) as the program asks for it: its values are the
    call's, which text made once, at trace time, would freeze (it was the proxy's own text,
    `<TensorProxy x: ...>`), so the call runs eagerly."""
    _require_context().not_modelled(f"squall: the program turns tensor {proxy.name} into text (its values); made while "
                                    "the program is traced, the text would be the first call's")


def _require_context() -> Any:
    ctx = _current.get()
    if ctx is None:
        raise RuntimeError("squall: a TensorProxy was used outside of tracing")
    return ctx


_SHORT_DTYPES = {
    torch.float32: "f32",
    torch.float64: "f64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.complex64: "c64",
    torch.complex128: "c128",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int16: "i16",
    torch.int8: "i8",
    torch.uint8: "u8",
    torch.bool: "b8",
}


def short_dtype(dtype: torch.dtype) -> str:
    """A compact dtype name for trace annotations (f32, bf16, i64, b8, ...)."""
    return _SHORT_DTYPES.get(dtype) or str(dtype).removeprefix("torch.")


def type_string(p: TensorProxy | NumberProxy) -> str:
    """The annotation a trace prints for a proxy, e.g. 'cpu f32[8, 12]', or 'float' for a number."""
    if type(p) is NumberProxy:
        return p.python_type.__name__
    return f'{p.device} {short_dtype(p.dtype)}[{", ".join(map(source, p.shape))}]'


def _shape(shape: Any) -> torch.Size | SymShape:
    """A proxy's shape: a torch.Size of ints, or a SymShape where some sizes are symbolic
    (`squall.symbolic`; torch.Size holds only ints)."""
    return shape if type(shape) is SymShape else as_shape(shape)


class _Absent:
    """What a proxy's read of a Python attribute answers where the tensor it stands for has none
    (the value a guard on that read holds: squall.guards' "attribute" reader)."""

    def __repr__(self) -> str:
        return "<absent>"


ABSENT = _Absent()


class TensorProxy(torch.Tensor):
    """A tensor's metadata under a name; torch operations on it are traced, not run.

    Its `shape` is a torch.Size, or, where some sizes are symbolic (`squall.symbolic.SymInt`),
    a `squall.symshape.SymShape` of ints and SymInts (a torch.Size to the program)."""

    # the marks torch._dynamo.mark_static_address / mark_dynamic / mark_static set on a tensor
    # (transformers' static cache marks its buffers while the model runs): held, and without
    # effect on a trace already being recorded
    __slots__ = ("name", "shape", "dtype", "device", "_requires_grad", "_is_param",
                 "_dynamo_static_input_type", "_dynamo_dynamic_indices", "_dynamo_static_indices",
                 "_dynamo_weak_dynamic_indices", "_dynamo_unbacked_indices")

    @staticmethod
    def __new__(
        cls,
        name: str | None = None,
        *,
        like: TensorProxy | None = None,
        shape: Any = None,
        dtype: torch.dtype | None = None,
        device: torch.device | str | None = None,
        requires_grad: bool | None = None,
    ) -> TensorProxy:
        if like is not None:
            shape = like.shape if shape is None else shape
            dtype = like.dtype if dtype is None else dtype
            device = like.device if device is None else device
            requires_grad = like.requires_grad if requires_grad is None else requires_grad
        if shape is None or dtype is None or device is None:
            raise ValueError("TensorProxy needs a shape, a dtype and a device (or like=)")
        device = device if type(device) is torch.device else torch.device(device)
        # a torch.Tensor without data (a wrapper), so that `isinstance`, `torch.is_tensor`,
        # torch.Tensor's unbound methods and torch's argument parser take it as a tensor; its
        # sizes there are a symbolic size's traced value, squall's own `shape` is the one read
        shape = shape if type(shape) is torch.Size else _shape(shape)  # (a torch.Size, most often `like`'s, as it is)
        sizes = shape if type(shape) is torch.Size else [v.value if type(v) is SymInt else v for v in shape]
        self = torch.Tensor._make_wrapper_subclass(cls, sizes, dtype=dtype, device=device)
        self.name = name if name is not None else _require_context().new_name()
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self._requires_grad = bool(requires_grad)
        return self

    @classmethod
    def like_recorded(cls, name: str, shape: Any, sizes: Any, dtype: torch.dtype, device: torch.device, requires_grad: bool) -> TensorProxy:
        """A proxy of metadata another proxy had, already in the forms `__new__` makes (`shape`
        a torch.Size or a SymShape, `sizes` its traced values, `device` a
        torch.device): how a replayed decomposition (squall.replays) makes its many proxies."""
        self = torch.Tensor._make_wrapper_subclass(cls, sizes, dtype=dtype, device=device)
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self._requires_grad = requires_grad
        return self

    def _program_sets_requires_grad(self, value: Any) -> None:
        # `x.requires_grad = v` in the program: modelled where x is a value the program computed
        # that becomes a leaf requiring grad; anything else runs the call eagerly
        # (squall.frontend.grad_roots). squall's own code sets `_requires_grad`.
        if bool(value) != self._requires_grad:
            _require_context().set_requires_grad(self, value)

    # read as fast as a slot (the getter runs in C); set by the program through the check above
    requires_grad = property(operator.attrgetter("_requires_grad"), _program_sets_requires_grad)

    @property
    def __class__(self):
        # `x.__class__ is torch.Tensor` in any code (a library's, a staticmethod's) answers as for
        # the tensor it stands for, with no patch, as a NumberProxy's does; `type(x)` is still the
        # proxy's class outside the program's recording copies, and squall's own checks use type()
        return torch.nn.Parameter if getattr(self, "_is_param", False) else torch.Tensor

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        # reached only by a call below torch's Python API, which __torch_function__ did not see
        raise BelowPythonAPI(f"squall: {func} reached a traced tensor below torch's Python API, where squall cannot trace it")

    def __format__(self, spec: str) -> str:
        # as eager's in the program's own code: a 0-d tensor formats its number (`f"{loss:.3f}"`,
        # read and guarded), any other gives its text (`_text_for_the_program`)
        if not _asked_by_the_program(1):
            return object.__format__(self, spec)
        if not self.shape:
            return format(self.item(), spec)
        if spec:
            raise TypeError("unsupported format string passed to Tensor.__format__")
        return _text_for_the_program(self)

    # --- metadata, answered without tracing -------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def ndimension(self) -> int:
        return len(self.shape)

    def size(self, dim: int | None = None):
        if dim is None:
            return self.shape
        return self.shape[dim]

    def stride(self, dim: int | None = None):
        # eager's strides, learnt from the call being traced and guarded (squall.frontend.layouts):
        # products of symbolic sizes where the layout is dense, so reading them pins no size
        strides = _require_context().strides(self)
        if dim is None:
            return strides
        if not strides:
            raise IndexError(f"Dimension specified as {dim} but tensor has no dimensions")
        if not -len(strides) <= dim < len(strides):
            raise IndexError(f"Dimension out of range (expected to be in range of [{-len(strides)}, {len(strides) - 1}], but got {dim})")
        return strides[dim]

    def storage_offset(self) -> int:
        # eager's, as for stride() (squall.frontend.layouts)
        return _require_context().storage_offset(self)

    def numel(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    nelement = numel

    def element_size(self) -> int:
        return self.dtype.itemsize

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        return self.device.type == "cpu"

    @property
    def is_meta(self) -> bool:
        return self.device.type == "meta"

    # the other device kinds' queries (torch.testing asks is_mps of every tensor it compares)
    is_mps = property(lambda self: self.device.type == "mps")
    is_xpu = property(lambda self: self.device.type == "xpu")
    is_xla = property(lambda self: self.device.type == "xla")
    is_mtia = property(lambda self: self.device.type == "mtia")
    is_maia = property(lambda self: self.device.type == "maia")
    is_ipu = property(lambda self: self.device.type == "ipu")
    is_vulkan = property(lambda self: self.device.type == "vulkan")

    @property
    def is_sparse(self) -> bool:
        return False

    is_sparse_csr = is_mkldnn = is_sparse

    @property
    def is_quantized(self) -> bool:
        return False

    @property
    def is_nested(self) -> bool:
        return False

    @property
    def layout(self) -> torch.layout:
        return torch.strided

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def is_complex(self) -> bool:
        return self.dtype.is_complex

    def is_contiguous(self, memory_format=torch.contiguous_format) -> bool:
        # eager's answer, as for stride() (squall.frontend.layouts): the trace itself models no
        # layout (every op makes a value, executors take any layout)
        ctx = _current.get()
        if ctx is None:  # (metadata read outside a trace: a proxy stands for a contiguous tensor)
            return memory_format in (torch.contiguous_format, torch.preserve_format)
        return ctx.is_contiguous(self, memory_format)

    def get_device(self) -> int:
        return self.device.index if self.device.type == "cuda" else -1

    @property
    def _base(self) -> TensorProxy | None:
        # eager's: the tensor a view was taken from (itself no view); a tensor the program takes
        # answers from outside the trace, so only where it is no view in eager
        ctx = _current.get()
        if ctx is None:
            return None
        root = ctx.views.root.get(id(self))
        origin = self if root is None else root
        real = ctx.speculation.inputs.get(origin.name) if ctx.speculation is not None else None
        if isinstance(real, torch.Tensor) and real._is_view():
            ctx.not_modelled(f"squall: the program reads the base of a view of tensor {origin.name}, a view it takes, whose base is outside the trace")
        return root

    def __getattr__(self, name: str) -> Any:
        # only where nothing else has it: a Python attribute the user set on the tensor this
        # proxy stands for (`x.scale = 2.0`), read as eager reads it, and guarded, present or
        # absent (`hasattr(x, "tag")`); squall's and torch's own probes ask the proxy alone
        ctx = _current.get()
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if ctx is None or name.startswith("__") or caller == "torch" or caller.startswith(("torch.", "squall")):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        if ctx.speculation is None:
            ctx.not_modelled(f"squall: the program asks tensor {self.name} for {name!r}, a Python attribute, whose value strict mode cannot follow")
        value = ctx.speculation.attribute(self, name)
        if value is ABSENT:
            raise AttributeError(f"'Tensor' object has no attribute '{name}'")
        return value

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return int(self.shape[0])  # Python wants an int: a symbolic size is read, guarded

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __repr__(self) -> str:
        if _asked_by_the_program(1):  # (`str(x)`, `f"{x!r}"`, a container's text in the program's code)
            return _text_for_the_program(self)
        return f'<TensorProxy {self.name}: "{type_string(self)}">'

    __hash__ = object.__hash__

    # --- values: read from the call being traced, and guarded (squall.frontend.speculation) ---------
    def __bool__(self):
        return _require_context().read_value("bool", (self,), what="bool(tensor)")

    def __int__(self):
        return _require_context().read_value("int", (self,), what="int(tensor)")

    def __float__(self):
        return _require_context().read_value("float", (self,), what="float(tensor)")

    def __index__(self):
        return _require_context().read_value("index", (self,), what="using a tensor as an index")

    def item(self):
        return _require_context().read_value("item", (self,), what="tensor.item()")

    def tolist(self):
        return _require_context().read_value("tolist", (self,), what="tensor.tolist()")

    def numpy(self, *, force: bool = False):
        # eager's array shares the tensor's memory (a write through it writes the tensor): the call runs eagerly
        _require_context().not_modelled(f"squall: {self.name}.numpy() is an array sharing the tensor's memory, which a trace cannot follow")

    # --- everything else goes through torch's own dispatch --------------------------------
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return _require_context().dispatch(func, args, kwargs or {})

    @property
    def T(self):
        return _require_context().dispatch(torch.Tensor.T.__get__, (self,), {})

    @property
    def mT(self):
        return _require_context().dispatch(torch.Tensor.mT.__get__, (self,), {})

    @property
    def real(self):
        return _require_context().dispatch(torch.Tensor.real.__get__, (self,), {})

    @property
    def imag(self):
        return _require_context().dispatch(torch.Tensor.imag.__get__, (self,), {})

    @property
    def data(self):
        return _require_context().dispatch(torch.Tensor.detach, (self,), {})

    def _gradient(self):
        # eager's .grad: None for a tensor the program computed (a non-leaf, or a leaf made just
        # now); for one given to it (an input, a parameter, a captured tensor) what the last
        # backward left, which backward replaces or accumulates between calls: not modelled
        ctx = _require_context()
        if self.name in ctx.constants or any(p is self for p in ctx.inputs):
            ctx.refuse(GRADIENT_NOT_MODELLED)
        return None

    def _program_sets_gradient(self, value: Any) -> None:
        _require_context().refuse(GRADIENT_NOT_MODELLED)

    grad = property(_gradient, _program_sets_gradient)

    @property
    def is_leaf(self) -> bool:
        # a tensor that requires no grad is a leaf, and so is a parameter; whether any other one
        # that requires grad is (the key holds requires_grad, not how a tensor was made) is not modelled
        if not self._requires_grad or getattr(self, "_is_param", False):
            return True
        _require_context().refuse(_HISTORY_NOT_MODELLED.format(".is_leaf"))

    @property
    def grad_fn(self):
        if not self._requires_grad or getattr(self, "_is_param", False):
            return None
        _require_context().refuse(_HISTORY_NOT_MODELLED.format(".grad_fn"))


# why a program reading how a tensor that requires grad was made runs eagerly
_HISTORY_NOT_MODELLED = ("squall: the program reads {} of a tensor that requires grad: whether it is a leaf depends on how the "
                         "caller made it, which squall's cache key (holding requires_grad) does not tell apart")


# why a program reading or setting a given tensor's .grad runs eagerly (the tracing context's `refuse`)
GRADIENT_NOT_MODELLED = (
    "squall: the program reads or sets the gradient (.grad) of a tensor it did not compute: backward replaces or "
    "accumulates it between calls (zero_grad() sets it to None), which squall's trace, holding the one it saw, does not follow"
)


class NumberProxy:
    """A Python int or float (or bool, as a comparison's result) known only at run time.

    `python_type` is the type it has at every call (it decides type promotion); `value` is
    its value in the call being traced, which speculation reads (`squall.ltorch.numbers`) where
    the program needs it concretely. Arithmetic and comparisons are recorded as number
    operations; a gradient never flows to a number (`requires_grad` is False).
    """

    __slots__ = ("name", "python_type", "value", "__weakref__")
    requires_grad = False

    def __init__(self, name: str | None, python_type: type, value: Any):
        self.name = name if name is not None else _require_context().new_name("n")
        self.python_type = python_type
        self.value = value

    def __repr__(self) -> str:
        # repr(n), f"{n!r}", and the text of a container holding it (`str([n, 1])`): while traced,
        # the program sees the number, read and guarded as str(n) is (squall's printers use `name`)
        ctx = _current.get()
        if ctx is None:
            return f"<NumberProxy {self.name}: {self.python_type.__name__}>"
        return repr(ctx.read_number("number", self))

    @property
    def __class__(self):
        # `isinstance(s, float)` consults `__class__` where the type itself does not match:
        # a run-time number answers as the number it stands for, in any code, with no patch
        return self.python_type

    def __hash__(self):
        # equal to the number it stands for, so it hashes as that number (`n in {1, 2}`, a dict
        # keyed by numbers): the lookup decides on the value, so the value is read and guarded
        return hash(_require_context().read_number("number", self))

    # --- the concrete value: read from the call being traced, and guarded ------------------
    def __bool__(self):
        return _require_context().read_number("bool", self)

    def __int__(self):
        return _require_context().read_number("int", self)

    def __float__(self):
        return _require_context().read_number("float", self)

    def __index__(self):
        return _require_context().read_number("index", self)

    def __complex__(self):
        return complex(_require_context().read_number("number", self))

    def __format__(self, spec: str) -> str:
        return format(_require_context().read_number("number", self), spec)

    def __str__(self) -> str:
        return str(_require_context().read_number("number", self))

    def __round__(self, ndigits=None):
        return round(_require_context().read_number("number", self), ndigits)

    def __trunc__(self):
        return int(self)

    def __floor__(self):
        return math.floor(_require_context().read_number("number", self))

    def __ceil__(self):
        return math.ceil(_require_context().read_number("number", self))

    def is_integer(self) -> bool:
        return float(_require_context().read_number("number", self)).is_integer()

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        # torch's argument parser accepts an object with __torch_function__ where it wants a
        # tensor, so `torch.add(x, s)` reaches the tracing context instead of a TypeError
        return _require_context().dispatch(func, args, kwargs or {})


_SYM_OPERATORS = {n: getattr(operator, n if n not in ("and", "or") else n + "_") for n in
                  "add sub mul truediv floordiv mod pow eq ne lt le gt ge and or xor".split()}


def _with_size(number: NumberProxy, op: str, size: SymInt, reflected: bool) -> Any:
    """A run-time number and a symbolic size under `op`. An int number's value is read and
    guarded, so the size stays symbolic; any other number keeps being computed at run time
    with the size's value, read and guarded (`int(number)` would truncate a float: `s * n`
    with s = 1.5 is not `1 * n`)."""
    if number.python_type is int:
        operands = (size, int(number)) if reflected else (int(number), size)
        return _SYM_OPERATORS[op](*operands)
    operands = (int(size), number) if reflected else (number, int(size))
    return _require_context().number_op(op, operands)


def _install_number_operators() -> None:
    # Arithmetic and comparisons on a NumberProxy are recorded (squall.prims.numbers); with a
    # tensor on the other side, the tensor's reflected operator takes the call.
    binary = "add sub mul truediv floordiv mod pow eq ne lt le gt ge and or xor".split()
    for n in binary:
        def op(self, other, _op=n):
            if type(other) is SymInt:
                return _with_size(self, _op, other, False)
            if type(other) is TensorProxy or not isinstance(other, (int, float, NumberProxy)):
                return NotImplemented
            return _require_context().number_op(_op, (self, other))

        def rop(self, other, _op=n):
            if type(other) is SymInt:
                return _with_size(self, _op, other, True)
            if type(other) is TensorProxy or not isinstance(other, (int, float, NumberProxy)):
                return NotImplemented
            return _require_context().number_op(_op, (other, self))

        op.__name__, rop.__name__ = f"__{n}__", f"__r{n}__"
        setattr(NumberProxy, op.__name__, op)
        if n not in ("eq", "ne", "lt", "le", "gt", "ge"):
            setattr(NumberProxy, rop.__name__, rop)
    for n in "neg pos abs".split():
        def unary(self, _op=n):
            return _require_context().number_op(_op, (self,))

        unary.__name__ = f"__{n}__"
        setattr(NumberProxy, unary.__name__, unary)


_install_number_operators()


install_tensor_methods(TensorProxy, _require_context)
