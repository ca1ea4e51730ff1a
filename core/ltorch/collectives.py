"""Collectives: torch.distributed's communication as operations of the torch language.

A program squall compiles may communicate: `funcol.all_reduce(x, "sum", group)` (the
functional collectives of `torch.distributed._functional_collectives`) or
`dist.all_reduce(x)` (c10d's in-place ones). Both reach the tracer as calls of the
`_c10d_functional` operators (`all_reduce`, `all_gather_into_tensor`,
`reduce_scatter_tensor`, `broadcast`, `wait_tensor`): the functional forms call them
directly, and c10d's functions hand themselves to the tracing mode
(`handle_torch_function`), where the in-place `all_reduce`, `all_gather_single`,
`reduce_scatter_single` and `broadcast` are forms of those operators and every other c10d
collective is refused with an error (run on the meta device as an unknown call, it would
communicate nothing). Each is
an ltorch op here, with a meta function that checks its arguments and gives the output's
shape, so the trace shows the communication, the planner hands it to an executor like any
other operation (the torch executor runs the `_c10d_functional` operator), and an
executor could take it.

Wait semantics are kept: a collective's result is a tensor the communication may still be
writing, and `wait_tensor` is the operation after which it may be read. Eager PyTorch wraps
the result in an `AsyncCollectiveTensor` that waits at its first use; the trace records the
`wait_tensor` where eager wraps (as PyTorch's own tracers do), so every read comes after it.
c10d's in-place forms are a collective, a wait, and the result written back into the tensor
the program passed (a functional trace; see `functionalization`). Autograd does not see
c10d's in-place collectives in eager, which passes a gradient through them unchanged; the
trace's functional collective is differentiated as PyTorch differentiates it (the gradient
is reduced too), so tracing one on a tensor that requires grad warns.

Gradients are PyTorch's, as operations (`grad_rules/collectives.py`): the backward of a
sum all_reduce is an all_reduce, of an all_gather a reduce_scatter, and so on, so the
backward trace shows its communication as the forward does.
"""
from __future__ import annotations

import inspect
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import torch

from .base import SquallWarning, torchsymbol
from .functionalization import TorchForm
from ..proxies import TensorProxy

__all__ = [
    "all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "wait_tensor", "wrap_tensor_autograd",
    "broadcast", "c10d_all_reduce", "c10d_all_gather_single", "c10d_reduce_scatter_single", "c10d_broadcast",
    "c10d_reduce", "c10d_all_gather", "c10d_gather", "c10d_scatter", "c10d_reduce_scatter", "c10d_all_to_all",
    "c10d_all_to_all_single", "c10d_send", "c10d_recv", "c10d_isend", "c10d_irecv", "c10d_all_reduce_coalesced",
    "c10d_all_gather_coalesced",
]  # fmt: skip

REDUCE_OPS = ("sum", "avg", "product", "min", "max", "band", "bor", "bxor")


def _check_tensor(name: str, a) -> None:
    if not isinstance(a, TensorProxy):
        raise TypeError(f"{name}: expected a tensor, got {type(a).__name__}")


def _check_reduce_op(name: str, reduce_op) -> str:
    if not isinstance(reduce_op, str) or reduce_op.lower() not in REDUCE_OPS:
        raise ValueError(f"{name}: reduce_op must be one of {', '.join(REDUCE_OPS)}; got {reduce_op!r}")
    return reduce_op.lower()


def _check_group_size(name: str, group_size) -> None:
    if type(group_size) is not int or group_size < 1:
        raise ValueError(f"{name}: group_size must be a positive int, got {group_size!r}")


def _contiguous_like(a: TensorProxy, shape=None) -> TensorProxy:
    out = TensorProxy(like=a, shape=a.shape if shape is None else shape)
    return WRAPPED_RESULTS.note(out) if WRAPPED_RESULTS is not None else out


_AVAILABLE = torch.distributed.is_available()
if _AVAILABLE:
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol  # defines _wrap_tensor_autograd, registers the autograd


def _find(owner: str, name: str) -> Callable | None:
    """`owner.name` (owner "ops": torch.ops._c10d_functional; "c10d": torch.distributed) where
    this PyTorch has it, else None."""
    found = torch.ops._c10d_functional if owner == "ops" else dist
    for part in name.split("."):
        found = getattr(found, part, None)
        if found is None:
            return None
    return found


def _torch_callable(owner: str, *names: str) -> Callable:
    """The first of `owner.name` for `names` that this PyTorch has (a `_c10d_functional`
    operator or overload, a c10d function; later PyTorch renamed some, and added others);
    where it has none, a stand-in that says so if it is ever called (torch never calls it, so
    the form or op that claims it is never reached)."""
    if _AVAILABLE:
        for name in names:
            found = _find(owner, name)
            if found is not None:
                return found
        missing = f"{' or '.join(names)}, which PyTorch {torch.__version__} does not have"
    else:
        missing = "torch.distributed, which this PyTorch build does not have"

    def unavailable(*args, **kwargs):
        raise RuntimeError(f"squall: {names[0]} needs {missing}")

    unavailable.__name__ = unavailable.__qualname__ = f"unavailable_{names[0].replace('.', '_')}"
    return unavailable


def hands_calls_to_tracing(fn: Callable) -> bool:
    """Whether a torch.distributed function passes a call on a traced tensor to
    `__torch_function__` (squall's tracing mode), which is how squall sees a c10d collective.
    PyTorch 2.10's c10d does this for all_reduce, all_gather, all_gather_into_tensor,
    reduce_scatter_tensor and all_to_all_single only; 2.13 for every one squall has a form for."""
    code = getattr(inspect.unwrap(fn), "__code__", None)
    return code is not None and "handle_torch_function" in code.co_names


def _op(name: str):
    return _torch_callable("ops", name), _torch_callable("ops", f"{name}.default")


@torchsymbol(*_op("all_reduce"), id="torch.ops._c10d_functional.all_reduce", replayable=False)
def all_reduce(input, reduce_op, group_name):
    """Reduce `input` over the group's ranks; the result is to be read after `wait_tensor`."""
    _check_tensor("all_reduce", input)
    _check_reduce_op("all_reduce", reduce_op)
    return _contiguous_like(input)


@torchsymbol(*_op("all_gather_into_tensor"), id="torch.ops._c10d_functional.all_gather_into_tensor", replayable=False)
def all_gather_into_tensor(input, group_size, group_name):
    """Every rank's `input`, concatenated along dim 0 in rank order."""
    _check_tensor("all_gather_into_tensor", input)
    _check_group_size("all_gather_into_tensor", group_size)
    if input.ndim == 0:
        raise ValueError("all_gather_into_tensor: expected a tensor of at least one dimension, got a 0-d tensor")
    return _contiguous_like(input, (input.shape[0] * group_size, *input.shape[1:]))


@torchsymbol(*_op("reduce_scatter_tensor"), id="torch.ops._c10d_functional.reduce_scatter_tensor", replayable=False)
def reduce_scatter_tensor(input, reduce_op, group_size, group_name):
    """`input` reduced over the ranks, each rank keeping its 1/group_size slice of dim 0."""
    _check_tensor("reduce_scatter_tensor", input)
    _check_reduce_op("reduce_scatter_tensor", reduce_op)
    _check_group_size("reduce_scatter_tensor", group_size)
    if input.ndim == 0 or input.shape[0] % group_size:
        raise ValueError(
            f"reduce_scatter_tensor: dim 0 of the input (shape {list(input.shape)}) must be divisible by "
            f"the group size {group_size}"
        )
    return _contiguous_like(input, (input.shape[0] // group_size, *input.shape[1:]))


@torchsymbol(*_op("broadcast"), id="torch.ops._c10d_functional.broadcast", replayable=False)
def broadcast(input, src, group_name):
    """The `input` of the group's rank `src` (a rank within the group), on every rank."""
    _check_tensor("broadcast", input)
    if type(src) is not int or src < 0:
        raise ValueError(f"broadcast: src must be a rank (a non-negative int), got {src!r}")
    return _contiguous_like(input)


@torchsymbol(*_op("wait_tensor"), id="torch.ops._c10d_functional.wait_tensor", replayable=False)
def wait_tensor(tensor):
    """`tensor` once the collective that produces it has finished (blocking on CPU, a stream
    dependency on CUDA)."""
    _check_tensor("wait_tensor", tensor)
    return TensorProxy(like=tensor)


# eager wraps a collective's result to wait at its first use; the trace waits there. PyTorch
# 2.10 has no _wrap_tensor_autograd: it wraps the result in Python (AsyncCollectiveTensor), which
# squall reads through with a wait where the program first uses it (WrappedResults)
wrap_tensor_autograd = TorchForm(wait_tensor, _torch_callable("ops", "_wrap_tensor_autograd.default"), signature=wait_tensor.meta)


class WrappedResults:
    """How squall reads a functional collective's result that PyTorch wraps in Python.

    PyTorch 2.10 has no `_c10d_functional._wrap_tensor_autograd`: funcol wraps each result in
    an `AsyncCollectiveTensor` built in Python, which no torch call shows. Its constructor reads
    the result's strides and storage offset, answered here without recording anything (a
    collective's result is contiguous: its meta function makes it so); where the program first
    uses the wrapper, it stands for the result's `wait_tensor`, as the form above records it
    where PyTorch has the op.
    """

    def __init__(self, wrapper: type):
        self.wrapper = wrapper
        # collective results traced, by id (a proxy's == is a traced comparison, not identity)
        self._results: weakref.WeakValueDictionary[int, TensorProxy] = weakref.WeakValueDictionary()

    def note(self, result: TensorProxy) -> TensorProxy:
        """Remember `result` as a collective's result; returns it."""
        self._results[id(result)] = result
        return result

    def layout(self, func: Callable, args: tuple) -> Any:
        """The answer to a read of a collective result's layout (None: not such a read)."""
        name = getattr(func, "__name__", None)
        if name not in _LAYOUT_READS or not args or self._results.get(id(args[0])) is not args[0]:
            return None
        method = getattr(torch.Tensor, name)
        if method is not func:
            return None  # a function of that name, not torch.Tensor's method
        shape = args[0].shape
        if name == "storage_offset":
            return 0
        strides = [1] * len(shape)
        for i in range(len(shape) - 2, -1, -1):
            strides[i] = strides[i + 1] * max(shape[i + 1], 1)
        return tuple(strides) if len(args) == 1 else strides[args[1]]

    def wait(self, wrapped: torch.Tensor) -> TensorProxy | None:
        """The wait of the result `wrapped` holds (None for a real result captured from outside
        the compiled program)."""
        inner = getattr(wrapped, "elem", None)
        return wait_tensor(inner) if type(inner) is TensorProxy else None


_LAYOUT_READS = ("stride", "storage_offset")
# this PyTorch's wrapping, where it wraps in Python (None where it calls _wrap_tensor_autograd)
WRAPPED_RESULTS: WrappedResults | None = (
    WrappedResults(funcol.AsyncCollectiveTensor) if _AVAILABLE and _find("ops", "_wrap_tensor_autograd") is None else None
)


# --- c10d's in-place collectives -------------------------------------------------------------


def _reduce_op_name(name: str, op) -> str:
    for known in REDUCE_OPS:
        if op == getattr(dist.ReduceOp, known.upper()):
            return known
    raise ValueError(f"{name}: squall traces the reductions {', '.join(REDUCE_OPS)}; got {op!r}")


def _sync(name: str, async_op: bool) -> None:
    if async_op:
        raise NotImplementedError(
            f"squall: {name}(async_op=True) returns a Work handle to wait on, which a compiled program cannot "
            "hand out; call it with async_op=False inside the compiled function (squall waits before the "
            "result is read), or use torch.distributed._functional_collectives and wait_tensor"
        )


def _differentiated_as_functional(name: str, tensor) -> None:
    # eager passes a gradient through c10d's in-place collectives unchanged (autograd does not
    # see them, and warns that this may be incorrect); squall's trace has the functional
    # collective, whose gradient is communicated too: a different number, so say so
    if torch.is_grad_enabled() and isinstance(tensor, TensorProxy) and tensor.requires_grad:
        warnings.warn(
            f"squall: {name} on a tensor that requires grad is differentiated as the functional "
            "collective (its gradient is reduced across ranks too); eager PyTorch passes the gradient "
            "through c10d's in-place collectives unchanged. Call it under torch.no_grad(), or use "
            "torch.distributed._functional_collectives, to say which you mean.",
            SquallWarning,
            stacklevel=5,
        )


def _group_name(group) -> str:
    return str(funcol._resolve_group_name(dist.group.WORLD if group is None else group))


def _c10d_all_reduce(tensor, op=None, group=None, async_op=False):
    _sync("torch.distributed.all_reduce", async_op)
    _differentiated_as_functional("torch.distributed.all_reduce", tensor)
    return wait_tensor(all_reduce(tensor, _reduce_op_name("torch.distributed.all_reduce", op), _group_name(group)))


def _c10d_all_gather_single(output_tensor, input_tensor, group=None, async_op=False):
    _sync("torch.distributed.all_gather_single", async_op)
    _differentiated_as_functional("torch.distributed.all_gather_single", input_tensor)
    return wait_tensor(all_gather_into_tensor(input_tensor, dist.get_world_size(group), _group_name(group)))


def _c10d_reduce_scatter_single(output, input, op=None, group=None, async_op=False):
    _sync("torch.distributed.reduce_scatter_single", async_op)
    _differentiated_as_functional("torch.distributed.reduce_scatter_single", input)
    op_name = _reduce_op_name("torch.distributed.reduce_scatter_single", op)
    return wait_tensor(reduce_scatter_tensor(input, op_name, dist.get_world_size(group), _group_name(group)))


def _c10d_broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    _sync("torch.distributed.broadcast", async_op)
    _differentiated_as_functional("torch.distributed.broadcast", tensor)
    root = dist.distributed_c10d._canonicalize_group_rank(dist.group.WORLD if group is None else group, src, group_src)
    return wait_tensor(broadcast(tensor, root, _group_name(group)))


# each writes its result into its first argument, as c10d does (the call is bound to c10d's own
# signature, its defaults applied, before it reaches the function above)
c10d_all_reduce = TorchForm(_c10d_all_reduce, _torch_callable("c10d", "all_reduce"), writes=0)
# PyTorch 2.10 has these as all_gather_into_tensor and reduce_scatter_tensor (later releases
# keep those names as deprecated aliases that call the new ones)
c10d_all_gather_single = TorchForm(_c10d_all_gather_single, _torch_callable("c10d", "all_gather_single", "all_gather_into_tensor"), writes=0)
c10d_reduce_scatter_single = TorchForm(
    _c10d_reduce_scatter_single, _torch_callable("c10d", "reduce_scatter_single", "reduce_scatter_tensor"), writes=0
)
c10d_broadcast = TorchForm(_c10d_broadcast, _torch_callable("c10d", "broadcast"), writes=0)


def _refused(name: str) -> TorchForm:
    """The form of a c10d collective squall does not trace: calling it in a compiled program is
    an error (running it on the meta device, as an unknown call, would communicate nothing)."""

    def refuse(*args, **kwargs):
        raise NotImplementedError(
            f"squall: torch.distributed.{name} is not traced inside a compiled program; squall traces "
            "all_reduce, all_gather_single (all_gather_into_tensor), reduce_scatter_single "
            "(reduce_scatter_tensor) and broadcast, and the functional collectives of "
            f"torch.distributed._functional_collectives. Call {name} outside the compiled function."
        )

    return TorchForm(refuse, _torch_callable("c10d", name), signature=refuse, before=refuse)


c10d_reduce = _refused("reduce")
c10d_all_gather = _refused("all_gather")
c10d_gather = _refused("gather")
c10d_scatter = _refused("scatter")
c10d_reduce_scatter = _refused("reduce_scatter")
c10d_all_to_all = _refused("all_to_all")
c10d_all_to_all_single = _refused("all_to_all_single")
c10d_send = _refused("send")
c10d_recv = _refused("recv")
c10d_isend = _refused("isend")
c10d_irecv = _refused("irecv")
c10d_all_reduce_coalesced = _refused("all_reduce_coalesced")
c10d_all_gather_coalesced = _refused("all_gather_coalesced")

# the c10d functions squall traces or refuses that this PyTorch does not hand to tracing: a call
# of one in a compiled program reaches its process group with squall's proxy
NOT_HANDED_TO_TRACING: frozenset[str] = frozenset(
    fn.__name__
    for n in __all__
    if _AVAILABLE and n.startswith("c10d_")
    for fn in globals()[n].torchfns
    if not fn.__name__.startswith("unavailable_") and not hands_calls_to_tracing(fn)
)


def untraced_c10d_error(error: BaseException) -> NotImplementedError | None:
    """What to raise for `error` when it came out of a c10d collective that this PyTorch does
    not hand to tracing (its process group refused squall's proxy, a TypeError, or passed it to
    an op below torch's Python API, which the proxy refuses); None otherwise."""
    code, tb = None, error.__traceback__
    while tb is not None:
        frame_code = tb.tb_frame.f_code
        if frame_code.co_name in NOT_HANDED_TO_TRACING and frame_code.co_filename == dist.distributed_c10d.__file__:
            code = frame_code  # the innermost such call
        tb = tb.tb_next
    if code is None:
        return None
    return NotImplementedError(
        f"squall: torch.distributed.{code.co_name} is not traced on PyTorch {torch.__version__}: this "
        "release's c10d does not hand the call to tracing (__torch_function__; later releases do), so "
        "it reached the process group with squall's stand-in tensor. Call it outside the compiled "
        "function, or use torch.distributed._functional_collectives, which is traced."
    )
