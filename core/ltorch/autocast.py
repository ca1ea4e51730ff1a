"""torch.autocast in traces: which casts autocast makes for a torch call, asked of torch itself.

Autocast's op lists live in PyTorch's C++ (ops that run in the lower precision, ops that run in
float32, ops that promote their operands to one dtype) and differ by device and version. So
squall keeps no list: for a torch call traced while autocast is on, `AutocastCasts` runs the same
call on fake tensors of the proxies' metadata, under the same autocast state, and records with a
dispatch mode which of the call's tensors autocast converts (an `aten._to_copy` of an argument,
or of a view of one: a cast commutes with a view) to which dtype. It runs the call again without
autocast on fake tensors of the converted dtypes and accepts the answer only where that run
makes the same computing ops on the same dtypes and returns the same dtypes: then "convert these
arguments, then the op without autocast" is what eager computes. The dispatcher records those
conversions and traces the op on the converted proxies with autocast off (squall.ltorch.base),
as eager's autocast casts once, at the outermost op it lists. Anything else (a fake run that
fails, an op that converts an intermediate value, an in-place op whose operand is cast) is
refused with `UnmodelledMode`: the call runs eagerly, with a warning, never in a wrong dtype.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException, FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import TreeSpec, tree_flatten, tree_unflatten

from ..proxies import NumberProxy
from ..symbolic import SymInt
from .unmodelled import UnmodelledMode

__all__ = ["autocast_state", "autocast_entered", "AutocastCasts", "without_autocast", "AUTOCAST_DEVICE_TYPES"]

# the device types torch.autocast takes (torch.is_autocast_enabled(d) answers for each)
AUTOCAST_DEVICE_TYPES = ("cpu", "cuda", "xpu", "mps", "hpu", "xla", "ipu", "mtia", "maia", "privateuseone")
_is_any_autocast_enabled = torch._C._is_any_autocast_enabled
_TO_COPY = torch.ops.aten._to_copy.default
_DEVICE_READ = torch.ops.prim.device.default
_FAKE_TENSOR_LOG = logging.getLogger("torch._subclasses.fake_tensor")
_DATA_DEPENDENT = (DynamicOutputShapeException, DataDependentOutputException)


def autocast_state() -> tuple | None:
    """The thread's autocast state as a key: the (device type, dtype) of each device type where
    autocast is enabled, and whether its cast cache is on; None where it is enabled nowhere.

    Each device type asked costs a string parse in torch (a microsecond): only those this
    machine has tensors of are asked (`_devices_here`), all of them where none of those is on."""
    if not _is_any_autocast_enabled():
        return None
    enabled = tuple((d, torch.get_autocast_dtype(d)) for d in _devices_here() if torch.is_autocast_enabled(d))
    if not enabled:
        enabled = tuple((d, torch.get_autocast_dtype(d)) for d in AUTOCAST_DEVICE_TYPES if torch.is_autocast_enabled(d))
    return enabled, torch.is_autocast_cache_enabled()


@functools.cache
def _devices_here() -> tuple[str, ...]:
    """The device types whose autocast can touch a tensor here: the CPU, each accelerator this
    machine has, and a registered out-of-tree backend (autocast on for another device type
    changes no op on these)."""
    here = ["cpu"]
    for name in ("cuda", "xpu", "mtia", "hpu"):
        backend = getattr(torch, name, None)
        available = getattr(backend, "is_available", None)
        if available is not None and available():
            here.append(name)
    if torch.backends.mps.is_available():
        here.append("mps")
    if "torch_xla" in sys.modules:
        here.append("xla")
    if torch._C._get_privateuse1_backend_name() != "privateuseone":
        here.append(torch._C._get_privateuse1_backend_name())
    return tuple(here)


@contextlib.contextmanager
def autocast_entered(state: tuple | None) -> Iterator[None]:
    """The autocast state `state` (`autocast_state()`'s) in force, whatever is now: to trace again
    for an entry made under it from another state (a backward's replan)."""
    with contextlib.ExitStack() as stack:
        enabled = dict(state[0]) if state is not None else {}
        for device in AUTOCAST_DEVICE_TYPES:
            if device not in enabled and torch.is_autocast_enabled(device):
                stack.enter_context(torch.autocast(device, enabled=False))
        for device, dtype in enabled.items():
            stack.enter_context(torch.autocast(device, dtype=dtype, cache_enabled=state[1]))
        yield


@contextlib.contextmanager
def _quiet(log: logging.Logger) -> Iterator[None]:
    disabled, log.disabled = log.disabled, True
    try:
        yield
    finally:
        log.disabled = disabled


def without_autocast(fn: Callable) -> Callable:
    """`fn` run with autocast off: a program traced under autocast holds its casts already, and
    a call autocast would cast again inside it (a decomposition's matmul) would compute in
    another dtype than traced."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        with torch._C._DisableAutocast():
            return fn(*args, **kwargs)

    return run


class _Recorder(TorchDispatchMode):
    """Records each aten op a call reaches: (op, its tensor arguments, its keyword dtype, its outputs)."""

    def __init__(self):
        super().__init__()
        self.ops: list[tuple[Any, list, Any, list]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        tensors = [a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)]
        outs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        self.ops.append((func, tensors, kwargs.get("dtype"), outs))
        return out


def _computing_ops(ops: list, skipped: set[int]) -> list[tuple]:
    """What a run computed: each op but views, device reads and the casts in `skipped`, with its
    tensor arguments' dtypes."""
    return [(func, tuple(t.dtype for t in tensors)) for i, (func, tensors, _, _) in enumerate(ops)
            if i not in skipped and func is not _DEVICE_READ and not getattr(func, "is_view", False)]


def _argument_casts(ops: list, args: list) -> list[tuple[int, int, torch.dtype]]:
    """(op index, argument index, dtype) of each conversion to another dtype of a call's tensor
    argument, or of a view of one (a cast commutes with a view), among a run's recorded ops."""
    origin = {id(a): i for i, a in enumerate(args) if isinstance(a, torch.Tensor)}
    found = []
    for n, (op, tensors, dtype, outs) in enumerate(ops):
        source = origin.get(id(tensors[0])) if tensors else None
        if source is None:
            continue
        if getattr(op, "is_view", False):
            origin.update((id(o), source) for o in outs)
        elif op is _TO_COPY and dtype is not None and dtype != tensors[0].dtype:
            found.append((n, source, dtype))
    return found


def _hint(x: Any) -> Any:
    """A symbolic size or a run-time number as its value in the call being traced (read unguarded:
    autocast's casts depend on dtypes, not on sizes or numbers)."""
    return x.value if type(x) is SymInt or type(x) is NumberProxy else x


class AutocastCasts:
    """The casts autocast makes for torch calls, asked of torch on fake tensors and kept per
    (torch function, argument metadata, autocast state)."""

    _KEEP = 4096

    def __init__(self):
        self._known: dict[tuple, tuple[dict[int, torch.dtype], tuple] | str] = {}

    def casts(self, func: Callable, name: str, leaves: list, spec: TreeSpec, state: tuple) -> tuple[dict[int, torch.dtype], tuple]:
        """({leaf index: dtype autocast converts that tensor to}, the dtypes of the call's tensor
        outputs) for `func` called with `leaves` (its (args, kwargs) flattened to `spec`) under
        the autocast state in force (`state`); raises UnmodelledMode where autocast's effect is
        not such casts."""
        key = self._key(func, leaves, spec, state)
        known = self._known.get(key) if key is not None else None
        if known is None:
            try:
                known = self._ask(func, name, leaves, spec)
            except UnmodelledMode as refused:
                known = str(refused)
            if key is not None:
                if len(self._known) >= self._KEEP:
                    self._known.clear()
                self._known[key] = known
        if type(known) is str:
            raise UnmodelledMode(known)
        return known

    @staticmethod
    def _key(func: Callable, leaves: list, spec: TreeSpec, state: tuple) -> tuple | None:
        parts: list = [func, state, str(spec)]
        for x in leaves:
            if isinstance(x, torch.Tensor):
                parts.append((x.dtype, x.device, tuple(map(_hint, x.shape)), x.requires_grad))
            else:
                parts.append((type(x), _hint(x)))
        try:
            hash(tuple(parts))
        except TypeError:
            return None  # an argument without a value key: asked at every call
        return tuple(parts)

    def _ask(self, func: Callable, name: str, leaves: list, spec: TreeSpec) -> tuple[dict[int, torch.dtype], tuple]:
        # a failed run is an answer here (said in the refusal), not an error for torch's log to print
        with _quiet(_FAKE_TENSOR_LOG):
            try:
                return self._asked(func, name, leaves, spec, FakeTensorMode())
            except UnmodelledMode as refused:
                if not isinstance(refused.__cause__, _DATA_DEPENDENT):
                    raise
            # an output shaped by the data (`x[x > 0]`, `nonzero`): fake tensors with a shape
            # environment give it a size of its own (slower to make, so only where needed)
            return self._asked(func, name, leaves, spec, FakeTensorMode(shape_env=ShapeEnv()))

    def _asked(self, func: Callable, name: str, leaves: list, spec: TreeSpec, mode: FakeTensorMode) -> tuple[dict[int, torch.dtype], tuple]:
        refused = f"squall: under torch.autocast, squall could not learn from torch which dtype casts {name} makes"

        def fakes(casts: dict[int, torch.dtype]) -> list:
            # fresh ones for each run (an in-place op changes its operand's metadata), one per
            # distinct tensor (the call sees `x @ x` as eager's does)
            made: dict[int, torch.Tensor] = {}
            out = []
            for i, x in enumerate(leaves):
                if isinstance(x, torch.Tensor):
                    if id(x) not in made:
                        with mode:
                            made[id(x)] = torch.empty(tuple(map(_hint, x.shape)), dtype=casts.get(i, x.dtype), device=x.device)
                    out.append(made[id(x)])
                else:
                    out.append(_hint(x))
            return out

        try:
            with torch._C.DisableTorchFunction():
                args = fakes({})
                recorded, out = self._run(func, spec, args, mode)
        except Exception as error:  # noqa: BLE001 - whatever fails on fake tensors: not modelled
            raise UnmodelledMode(f"{refused} (its run on fake tensors failed: {type(error).__name__})") from error
        # autocast's casts: the conversions of an argument (or a view of one) the autocast run makes
        # beyond those the call makes itself without autocast (sdpa's math upcasts bfloat16
        # operands); autocast's come first. Where the call fails without autocast (operands of
        # two dtypes that autocast makes one), every such conversion is taken for autocast's, and
        # the check below refuses the answer if that was wrong.
        extra = collections.Counter(c[1:] for c in _argument_casts(recorded, args))
        plain, plain_out = None, None
        try:
            with torch._C.DisableTorchFunction(), torch._C._DisableAutocast():
                plain_args = fakes({})
                plain, plain_out = self._run(func, spec, plain_args, mode)
        except Exception:  # noqa: BLE001
            pass
        else:
            extra.subtract(c[1:] for c in _argument_casts(plain, plain_args))
        casts: dict[int, torch.dtype] = {}
        cast_ops: set[int] = set()
        for n, source, dtype in _argument_casts(recorded, args):
            if extra[source, dtype] > 0:
                extra[source, dtype] -= 1
                if casts.setdefault(source, dtype) != dtype:
                    raise UnmodelledMode(f"{refused} (it converts one argument to two dtypes)")
                cast_ops.add(n)
        # a tensor passed twice (`x @ x`) is converted wherever it is passed
        casts = {j: dtype for i, dtype in list(casts.items()) for j, a in enumerate(args) if a is args[i]}
        if casts and (name.endswith("_") and not name.endswith("__") or name.split(".")[-1].startswith("__i")):
            raise UnmodelledMode(f"squall: under torch.autocast, the in-place {name} converts an operand it writes, which squall does not model")
        if casts or plain is None:  # the same call without autocast, on the converted arguments, must compute the same
            try:
                with torch._C.DisableTorchFunction(), torch._C._DisableAutocast():
                    plain, plain_out = self._run(func, spec, fakes(casts), mode)
            except Exception as error:  # noqa: BLE001
                raise UnmodelledMode(f"{refused} (its run without autocast failed: {type(error).__name__})") from error
        outputs = tuple(o.dtype for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor))
        plain_outputs = tuple(o.dtype for o in tree_flatten(plain_out)[0] if isinstance(o, torch.Tensor))
        if outputs != plain_outputs or _computing_ops(recorded, cast_ops) != _computing_ops(plain, set()):
            raise UnmodelledMode(f"{refused} (autocast converts a value computed inside it, not only its arguments)")
        return casts, outputs

    @staticmethod
    def _run(func: Callable, spec: TreeSpec, args: list, mode: FakeTensorMode) -> tuple[list, Any]:
        call_args, call_kwargs = tree_unflatten(args, spec)
        recorder = _Recorder()
        with mode, recorder:
            out = func(*call_args, **call_kwargs)
        return recorder.ops, out
