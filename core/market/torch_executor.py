"""The built-in torch executor: every prim and every ltorch op, run by PyTorch eager.

It is always asked last, so every program runs. It implements each ltorch op with the
torch callable the op stands for (softmax runs as one torch softmax, not six prims),
which is why a torch-only plan costs no more than eager.
"""
from __future__ import annotations

import operator
from collections.abc import Callable

import torch

from .. import ltorch, prims
from ..guards import GUARD, READ, guard_impl, read_impl
from ..ltorch.kernels import (
    all_kernels, batch_norm_functional, batch_norm_with_update_functional, efficient_attention, efficient_attention_backward,
    flash_attention, flash_attention_backward, flash_attention_for_cpu, flash_attention_for_cpu_backward, gelu_backward,
    fused_rms_norm_backward, native_dropout, native_dropout_backward, native_group_norm_backward, native_layer_norm_backward,
    nll_loss2d_backward, silu_backward, tanh_backward, threshold_backward,
)
from ..prims.base import PrimIDs
from ..proxies import real_tensor
from ..symbol import BoundSymbol, Symbol, Tags
from .executor import Implementation, InPlaceForm, OperatorExecutor
from .hookspecs import hookimpl
from .operations import OperationRegistry

__all__ = ["TorchExecutor", "PRIM_IMPLS", "make_executor"]


# The kernels call torch's own C methods (TensorBase's), never torch.Tensor's attributes: a user's
# replacement of one (`torch.Tensor.__mul__ = wrapped`) is traced where the program calls it, and
# a kernel calling it again would apply it twice (a backward's kernels stand for eager's C++
# derivative formulas, which never call it)
_BASE = torch._C.TensorBase
_VF = torch._C._VariableFunctions


def _operator(forward: Callable, reflected: Callable, on_numbers: Callable) -> Callable:
    """A binary Python operator as torch's C method: `forward(tensor, other)`, `reflected(tensor,
    number)` for a number on the left (as torch.Tensor's reflected operator computes it), and
    `on_numbers` for two run-time numbers."""

    def run(a, b):
        if isinstance(a, torch.Tensor):
            return forward(a, b)
        return reflected(b, a) if isinstance(b, torch.Tensor) else on_numbers(a, b)

    return run


# `number / tensor` as torch.Tensor's reflected division computes it: the reciprocal times the number
_true_divide = _operator(_BASE.__truediv__, lambda t, n: _BASE.__mul__(_BASE.reciprocal(t), n), operator.truediv)


def _broadcast_in_dim(a, shape, broadcast_dimensions):
    view = [1] * len(shape)
    for d, n in zip(broadcast_dimensions, a.shape):
        view[d] = n
    return _BASE.expand(_BASE.reshape(a, view), shape)


def _numbers_as_tensors(fn):
    # Prims accept a Python number for either operand; some torch functions take only tensors.
    def impl(a, b):
        if not real_tensor(a):
            a = torch.scalar_tensor(a, dtype=b.dtype, device=b.device)
        elif not real_tensor(b):
            b = torch.scalar_tensor(b, dtype=a.dtype, device=a.device)
        return fn(a, b)

    impl.__name__ = fn.__name__
    return impl


# --- shape impl helpers ---
def _slice(a, start_indices, end_indices, strides):
    return _BASE.__getitem__(a, tuple(slice(lo, hi, st) for lo, hi, st in zip(start_indices, end_indices, strides)))


def _pad(a, padding_value, padding_config):
    # Place `a` into a filled tensor wide enough for the non-negative padding (interior
    # padding as a strided store), then crop whatever the negative padding removes.
    grown, place, crop = [], [], []
    for (lo, hi, interior), n in zip(padding_config, a.shape):
        dilated = n + (n - 1) * interior if n > 0 else 0
        size = max(lo, 0) + dilated + max(hi, 0)
        grown.append(size)
        place.append(slice(max(lo, 0), max(lo, 0) + dilated, interior + 1))
        crop.append(slice(max(-lo, 0), size - max(-hi, 0)))
    out = torch.full(grown, padding_value, dtype=a.dtype, device=a.device)
    out[tuple(place)] = a
    return out[tuple(crop)]


# --- end shape impl helpers ---
# --- reduction impl helpers ---
def _over_dims(fn):
    # torch reads an empty dim list as "every dimension"; the prim means "no dimension"
    def impl(a, dims, **kwargs):
        if not dims:
            return fn(a.unsqueeze(0), (0,), **kwargs)
        return fn(a, tuple(dims), **kwargs)

    return impl


_sum_impl = _over_dims(lambda a, dims: torch.sum(a, dim=dims, dtype=a.dtype))
_amax_impl = _over_dims(lambda a, dims: torch.amax(a, dim=dims))
_amin_impl = _over_dims(lambda a, dims: torch.amin(a, dim=dims))
_var_impl = _over_dims(lambda a, dims, correction: torch.var(a, dim=dims, correction=correction))


def _prod_impl(a, dims):
    # torch.prod takes one dim at a time
    out = a
    for d in sorted(dims, reverse=True):
        out = torch.prod(out, dim=d, dtype=a.dtype)
    return out.clone() if not dims else out
# --- end reduction impl helpers ---
# --- indexing impl helpers ---
def _index(a, indices):
    return torch.ops.aten.index.Tensor(a, list(indices))


def _index_put(a, indices, values, accumulate):
    return torch.ops.aten.index_put.default(a, list(indices), values, accumulate)


# --- end indexing impl helpers ---
# --- factory impl helpers ---
def _iota(length, *, start, step, device, dtype):
    if not dtype.is_floating_point:
        return torch.arange(start, start + length * step, step, device=device, dtype=dtype)
    # start + step * i in the accumulation type torch's arange uses (double for float32/64),
    # not arange(start, end, step), whose length float rounding can change
    acc = torch.float64 if dtype in (torch.float32, torch.float64) else torch.float32
    return (torch.arange(length, device=device, dtype=acc) * step + start).to(dtype)


def _uniform(shape, minval, maxval, *, device, dtype):
    return torch.empty(shape, device=device, dtype=dtype).uniform_(minval, maxval)


def _uniform_philox(shape, minval, maxval, *, device, dtype, seed, offset):
    # one generator per call, seeded from (seed, offset): independent of the global state
    generator = torch.Generator(device=device)
    generator.manual_seed((seed * 0x9E3779B97F4A7C15 + offset) % (1 << 63))
    return torch.empty(shape, device=device, dtype=dtype).uniform_(minval, maxval, generator=generator)


def _normal(shape, mean, std, *, device, dtype):
    return torch.empty(shape, device=device, dtype=dtype).normal_(mean, std)


# --- end factory impl helpers ---
# --- linalg impl helpers ---
# --- end linalg impl helpers ---


# prim id -> the torch callable that computes it, with the prim's exact signature and result
PRIM_IMPLS = {
    # elementwise unary
    PrimIDs.ABS: torch.abs,
    PrimIDs.NEG: torch.neg,
    PrimIDs.EXP: torch.exp,
    PrimIDs.EXPM1: torch.expm1,
    PrimIDs.EXP2: torch.exp2,
    PrimIDs.LOG: torch.log,
    PrimIDs.LOG1P: torch.log1p,
    PrimIDs.LOG2: torch.log2,
    PrimIDs.LOG10: torch.log10,
    PrimIDs.SQRT: torch.sqrt,
    PrimIDs.RSQRT: torch.rsqrt,
    PrimIDs.SIN: torch.sin,
    PrimIDs.COS: torch.cos,
    PrimIDs.TAN: torch.tan,
    PrimIDs.ASIN: torch.asin,
    PrimIDs.ACOS: torch.acos,
    PrimIDs.ATAN: torch.atan,
    PrimIDs.ASINH: torch.asinh,
    PrimIDs.ACOSH: torch.acosh,
    PrimIDs.ATANH: torch.atanh,
    PrimIDs.SINH: torch.sinh,
    PrimIDs.COSH: torch.cosh,
    PrimIDs.TANH: torch.tanh,
    PrimIDs.ERF: torch.erf,
    PrimIDs.ERFC: torch.erfc,
    PrimIDs.ERFINV: torch.erfinv,
    PrimIDs.LGAMMA: torch.lgamma,
    PrimIDs.DIGAMMA: torch.digamma,
    PrimIDs.FLOOR: torch.floor,
    PrimIDs.CEIL: torch.ceil,
    PrimIDs.ROUND: torch.round,
    PrimIDs.TRUNC: torch.trunc,
    PrimIDs.SIGN: torch.sign,
    PrimIDs.SIGNBIT: torch.signbit,
    PrimIDs.RECIPROCAL: torch.reciprocal,
    PrimIDs.ISFINITE: torch.isfinite,
    PrimIDs.ISNAN: torch.isnan,
    PrimIDs.ISINF: torch.isinf,
    PrimIDs.LOGICAL_NOT: torch.logical_not,
    PrimIDs.BITWISE_NOT: torch.bitwise_not,
    PrimIDs.REAL: torch.real,
    PrimIDs.IMAG: torch.imag,
    # elementwise binary: Python operators accept a number on either side
    PrimIDs.ADD: _operator(_BASE.__add__, _BASE.__radd__, operator.add),
    PrimIDs.SUB: _operator(_BASE.__sub__, _VF.rsub, operator.sub),
    PrimIDs.MUL: _operator(_BASE.__mul__, _BASE.__rmul__, operator.mul),
    PrimIDs.DIV: lambda a, b, rounding_mode=None: (
        _true_divide(a, b) if rounding_mode is None else _numbers_as_tensors(lambda x, y: _VF.div(x, y, rounding_mode=rounding_mode))(a, b)
    ),
    PrimIDs.POW: _operator(_BASE.pow, lambda t, n: _VF.pow(n, t), operator.pow),
    PrimIDs.REMAINDER: _operator(_BASE.__mod__, lambda t, n: _VF.remainder(n, t), operator.mod),
    PrimIDs.FMOD: _numbers_as_tensors(torch.fmod),
    PrimIDs.ATAN2: _numbers_as_tensors(torch.atan2),
    PrimIDs.HYPOT: _numbers_as_tensors(torch.hypot),
    PrimIDs.COPYSIGN: _numbers_as_tensors(torch.copysign),
    PrimIDs.NEXTAFTER: _numbers_as_tensors(torch.nextafter),
    PrimIDs.MAXIMUM: _numbers_as_tensors(torch.maximum),
    PrimIDs.MINIMUM: _numbers_as_tensors(torch.minimum),
    PrimIDs.EQ: _operator(_BASE.__eq__, _BASE.__eq__, operator.eq),
    PrimIDs.NE: _operator(_BASE.__ne__, _BASE.__ne__, operator.ne),
    PrimIDs.LT: _operator(_BASE.__lt__, _BASE.__gt__, operator.lt),
    PrimIDs.LE: _operator(_BASE.__le__, _BASE.__ge__, operator.le),
    PrimIDs.GT: _operator(_BASE.__gt__, _BASE.__lt__, operator.gt),
    PrimIDs.GE: _operator(_BASE.__ge__, _BASE.__le__, operator.ge),
    PrimIDs.LOGICAL_AND: _numbers_as_tensors(torch.logical_and),
    PrimIDs.LOGICAL_OR: _numbers_as_tensors(torch.logical_or),
    PrimIDs.LOGICAL_XOR: _numbers_as_tensors(torch.logical_xor),
    PrimIDs.BITWISE_AND: _operator(_BASE.__and__, _BASE.__rand__, operator.and_),
    PrimIDs.BITWISE_OR: _operator(_BASE.__or__, _BASE.__ror__, operator.or_),
    PrimIDs.BITWISE_XOR: _operator(_BASE.__xor__, _BASE.__rxor__, operator.xor),
    PrimIDs.BITWISE_LEFT_SHIFT: _operator(_BASE.__lshift__, lambda t, n: _VF.bitwise_left_shift(n, t), operator.lshift),
    PrimIDs.BITWISE_RIGHT_SHIFT: _operator(_BASE.__rshift__, lambda t, n: _VF.bitwise_right_shift(n, t), operator.rshift),
    PrimIDs.WHERE: torch.where,
    # a new tensor even of the same dtype (Tensor.to(copy=True) records one): `a.to(dtype)` returns `a`
    PrimIDs.CONVERT_ELEMENT_TYPE: lambda a, dtype: _BASE.to(a, dtype, copy=True),
    PrimIDs.COPY_: lambda dst, src: _BASE.copy_(dst, src),
    PrimIDs.DEVICE_PUT: lambda a, device, *, non_blocking: _BASE.to(a, device, non_blocking=non_blocking),
    # --- shape prims ---
    PrimIDs.BROADCAST_IN_DIM: _broadcast_in_dim,
    PrimIDs.RESHAPE: torch.reshape,
    PrimIDs.TRANSPOSE: torch.permute,
    PrimIDs.SLICE: _slice,
    PrimIDs.SQUEEZE: lambda a, dims: torch.squeeze(a, tuple(dims)),
    PrimIDs.CAT: lambda tensors, dim: torch.cat(tuple(tensors), dim),
    PrimIDs.PAD: _pad,
    PrimIDs.FLIP: lambda a, dims: torch.flip(a, tuple(dims)),
    PrimIDs.UNFOLD: lambda a, dim, size, step: _BASE.unfold(a, dim, size, step),
    # --- end shape prims ---
    # --- reduction prims ---
    PrimIDs.SUM: _sum_impl,
    PrimIDs.PROD: _prod_impl,
    PrimIDs.AMAX: _amax_impl,
    PrimIDs.AMIN: _amin_impl,
    PrimIDs.ARGMAX: lambda a, dim: torch.argmax(a, dim),
    PrimIDs.ARGMIN: lambda a, dim: torch.argmin(a, dim),
    PrimIDs.VAR: _var_impl,
    PrimIDs.CUMSUM: lambda a, dim: torch.cumsum(a, dim, dtype=a.dtype),
    PrimIDs.CUMPROD: lambda a, dim: torch.cumprod(a, dim, dtype=a.dtype),
    PrimIDs.TOPK: lambda a, k, dim, largest, sorted: tuple(torch.topk(a, k, dim, largest, sorted)),
    PrimIDs.SORT: lambda a, dim, descending, stable: tuple(torch.sort(a, dim=dim, descending=descending, stable=stable)),
    # --- end reduction prims ---
    # --- indexing prims ---
    PrimIDs.TAKE: lambda a, index, dim: torch.index_select(a, dim, index),
    PrimIDs.TAKE_ALONG_AXIS: lambda a, index, dim: torch.gather(a, dim, index),
    PrimIDs.INDEX: _index,
    PrimIDs.INDEX_PUT: _index_put,
    PrimIDs.INDEX_ADD: lambda a, index, source, dim, alpha=1: torch.index_add(a, dim, index, source, alpha=alpha),
    PrimIDs.INDEX_COPY: lambda a, index, source, dim: torch.index_copy(a, dim, index, source),
    PrimIDs.SCATTER: lambda a, index, src, dim: torch.scatter(a, dim, index, src),
    PrimIDs.SCATTER_ADD: lambda a, index, src, dim: torch.scatter_add(a, dim, index, src),
    PrimIDs.SCATTER_REDUCE: lambda a, index, src, dim, reduce, include_self: torch.scatter_reduce(
        a, dim, index, src, reduce, include_self=include_self
    ),
    # --- end indexing prims ---
    # --- factory prims ---
    PrimIDs.FULL: lambda shape, fill_value, *, device, dtype: torch.full(shape, fill_value, device=device, dtype=dtype),
    PrimIDs.IOTA: _iota,
    PrimIDs.UNIFORM: _uniform,
    PrimIDs.UNIFORM_PHILOX: _uniform_philox,
    PrimIDs.NORMAL: _normal,
    # --- end factory prims ---
    # --- linalg prims ---
    PrimIDs.MATMUL: torch.matmul,
    PrimIDs.CONVOLUTION: torch.convolution,
    # --- end linalg prims ---
    # Python numbers known at run time: the operator itself
    **{getattr(PrimIDs, f"NUMBER_{name.upper()}"): fn for name, fn in prims.numbers.OPERATORS.items()},
    PrimIDs.CONVERT_NUMBER: prims.numbers.convert,
}


class TorchExecutor(OperatorExecutor):
    """Runs every prim and every ltorch op (and opaque torch calls) with PyTorch."""

    def __init__(self):
        super().__init__(
            "torch",
            version=torch.__version__,
            distribution="squall",
            default_rank=1_000_000,
            supports_autograd=True,
        )
        missing = sorted(set(prims.all_prims()) - set(PRIM_IMPLS))
        if missing:
            raise RuntimeError(f"squall: the torch executor has no implementation for {missing}")
        for prim_id, fn in PRIM_IMPLS.items():
            self.register_implementation(prim_id, fn)
        # ltorch ops, and the backward kernels grad rules call, each run as the torch callable it stands for
        for sym in ltorch.all_symbols().values():
            self.register_implementation(sym, sym.torchfns[0])
        for sym in all_kernels().values():
            self.register_implementation(sym, KERNEL_IMPLS[sym.id])
        self.register_implementation(GUARD, guard_impl)
        self.register_implementation(READ, read_impl)

    def implementation_for(self, sym: Symbol) -> Implementation | None:
        found = self.implementations.get(sym.id)
        if found is None and Tags.OPAQUE in sym.tags:
            return Implementation(sym.torchfns[0])
        return found

    def in_place_form(self, bsym: BoundSymbol) -> InPlaceForm | None:
        return _IN_PLACE_FORMS.get(bsym.sym.id)


def _in_place(of: Symbol, name: str, impl: Callable, writes: dict[int, int], fresh: bool = False) -> InPlaceForm:
    """The in-place form of `of`: its meta, less the results written into arguments."""

    def meta(*args, **kwargs):
        out = of.meta(*args, **kwargs)
        kept = tuple(o for i, o in enumerate(out if isinstance(out, tuple) else (out,)) if i not in writes)
        return kept if len(kept) > 1 else (kept[0] if kept else None)

    sym = Symbol(f"torch.{name}", name, meta, is_prim=False, tags=(Tags.SIDE_EFFECT,))
    return InPlaceForm(sym, impl, writes, fresh)


def _batch_norm_updating(input, weight, bias, running_mean, running_var, training, momentum, eps):
    # eager's training batch norm: the kernel updates the running statistics it is handed (never a
    # copy of them: only the input is made dense, as the functional kernel's)
    return torch.ops.aten._native_batch_norm_legit.default(_dense(input), weight, bias, running_mean, running_var, training, momentum, eps)


def _batch_norm_with_update(input, weight, bias, running_mean, running_var, momentum, eps):
    # as `_batch_norm_updating`, for the pair that may run on cuDNN
    return torch.ops.aten._batch_norm_with_update.default(_dense(input), weight, bias, running_mean, running_var, momentum, eps)


def _writing(method: Callable) -> Callable:
    """An in-place form's impl from one of torch's in-place methods: it writes its first argument
    and has no other result (the method's return, that argument, is not one)."""

    def impl(*args, **kwargs):
        method(*args, **kwargs)

    return impl


def _writing_first(op: str, name: str, method: Callable, fresh: bool = False) -> InPlaceForm:
    """The in-place form of the ltorch op `op` whose result is written into its first argument by `method`."""
    return _in_place(ltorch.all_symbols()[op], name, _writing(method), {0: 0}, fresh)


# id of an operation -> how it writes results into its arguments, where a write-back follows it
_IN_PLACE_FORMS = {
    batch_norm_functional.id: _in_place(batch_norm_functional, "batch_norm_updating", _batch_norm_updating, {3: 3, 4: 4}),
    batch_norm_with_update_functional.id: _in_place(batch_norm_with_update_functional, "batch_norm_with_update", _batch_norm_with_update, {4: 3, 5: 4}),
    # a write-back of these into an input (`x.mul_(2)`, `buf.mul_(d).add_(x)` an in-place chain): one pass, not a new tensor and a copy
    "torch.add": _writing_first("torch.add", "add_", _BASE.add_),
    "torch.sub": _writing_first("torch.sub", "sub_", _BASE.sub_),
    "torch.mul": _writing_first("torch.mul", "mul_", _BASE.mul_),
    "torch.div": _writing_first("torch.div", "div_", _BASE.div_),
    "torch.masked_fill": _writing_first("torch.masked_fill", "masked_fill_", _BASE.masked_fill_),
    # a preallocated (static) KV cache written at its positions: a write of those, not a copy of the whole
    # (their functional forms copy the tensor they write, layout included: `fresh`)
    "torch.index_copy": _writing_first("torch.index_copy", "index_copy_", _BASE.index_copy_, fresh=True),
    "ltorch.setitem": _writing_first("ltorch.setitem", "setitem_", _BASE.__setitem__, fresh=True),
}


# kernels eager calls with the strided views it has (sdpa hands its transposed query, key and value
# to the flash kernel, and autograd hands them back to its backward), and the elementwise backward
# kernels, which read any strides (a mean's gradient broadcast to its input's shape, stride 0):
# copying them first costs a copy per tensor per call and changes nothing. Dropout draws its mask
# in its input's memory order (`empty_like`): a copy would draw another mask than eager's for the
# same seed wherever the input is a transposed view (attention's output in nn.TransformerEncoderLayer)
KERNELS_CALLED_WITH_VIEWS = frozenset({
    native_dropout.id, threshold_backward.id, gelu_backward.id, silu_backward.id, tanh_backward.id, native_dropout_backward.id,
})

# the CPU flash kernels take eager's strided views too (transposed heads, an expanded query), but
# read a query, key, value or output whose last stride is not 1 as if it were (a head dimension
# sliced `x[..., ::2]`: another result, silently). Eager runs such a call on its math path instead;
# squall decides the kernel on sizes alone, so those tensors alone (by position) are copied first,
# as CUDA's kernels' are (KERNELS_WITH_UNIT_LAST_STRIDE). The backward's incoming gradient (a sum's,
# expanded) and the log-sum-exp (laid out so by the forward kernel) are read by their strides, as eager hands them
CPU_FLASH_KERNELS = {flash_attention_for_cpu.id: (0, 1, 2), flash_attention_for_cpu_backward.id: (1, 2, 3, 4)}


# CUDA's flash and memory-efficient attention kernels take any strides but a last one other than 1
# (eager picks them only for such tensors, squall when tracing, for the sizes alone): a gradient
# that `expand` made (stride 0) is copied, the transposed views eager hands them are not. They run
# below autograd, as eager's autograd calls them: their backwards take undefined tensors (None),
# which only the kernels below autograd accept, and squall differentiates them itself
KERNELS_WITH_UNIT_LAST_STRIDE = frozenset({
    efficient_attention.id, efficient_attention_backward.id, flash_attention.id, flash_attention_backward.id,
})


# the memory-efficient kernel reads its bias (the additive mask) in rows aligned to this many
# elements; eager pads a mask whose rows are not, then views the padded rows at their length
_BIAS_ALIGNMENT = 16
_BIAS_ARGUMENT = {efficient_attention.id: 3, efficient_attention_backward.id: 4}


def _aligned_bias(bias: torch.Tensor) -> torch.Tensor:
    if all(s % _BIAS_ALIGNMENT == 0 for s in bias.stride()[:-1]):
        return bias
    # padded before its broadcast, as eager pads the mask it then expands (not a copy per head)
    mask = bias[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in bias.stride())]
    length = bias.shape[-1]
    return torch.nn.functional.pad(mask, (0, -length % _BIAS_ALIGNMENT))[..., :length].expand(bias.shape)


def _with_unit_last_stride(kernel: Callable, bias_at: int | None = None, below_autograd: bool = True,
                           only: tuple[int, ...] | None = None) -> Callable:
    def call(*args, **kwargs):
        args = [a.contiguous() if real_tensor(a) and a.ndim and a.stride(-1) != 1 and (only is None or i in only) else a
                for i, a in enumerate(args)]
        if bias_at is not None and real_tensor(args[bias_at]):
            args[bias_at] = _aligned_bias(args[bias_at])
        if not below_autograd:
            return kernel(*args, **kwargs)
        with torch._C._AutoDispatchBelowAutograd():
            return kernel(*args, **kwargs)

    call.__name__ = getattr(kernel, "__name__", "kernel")
    call.__wrapped__ = kernel
    return call


def _with_dense_tensors(kernel: Callable, contiguous: tuple[int, ...] = (), one_layout: tuple[int, ...] = ()) -> Callable:
    """An aten backward kernel called with dense tensors, as eager's autograd formulas call them:
    some CPU kernels (native_group_norm_backward) read a gradient that `expand` made (stride 0, as
    the backward of a sum gives) as if it were dense, and return garbage. A tensor laid out
    contiguous or channels-last goes as it is, as eager hands it over: copying a channels-last
    model's activations to contiguous ones made every kernel after it run on that layout (timm's
    resnet's training step in 1.5x eager's time, and its convolutions and pools on their slower path).
    The arguments at the positions `contiguous` are made contiguous whatever their layout, and those
    at `one_layout` contiguous unless all of them are laid out alike (KERNEL_LAYOUT_NEEDS)."""

    def call(*args, **kwargs):
        args = [a.contiguous() if i in contiguous and real_tensor(a) else _dense(a) if real_tensor(a) else a
                for i, a in enumerate(args)]
        if one_layout and len({args[i].is_contiguous() for i in one_layout if real_tensor(args[i])}) > 1:
            args = [a.contiguous() if i in one_layout and real_tensor(a) else a for i, a in enumerate(args)]
        return kernel(*args, **kwargs)

    call.__name__ = getattr(kernel, "__name__", "kernel")
    call.__wrapped__ = kernel
    return call


def _dense(t: torch.Tensor) -> torch.Tensor:
    """`t` where it is laid out contiguous or channels-last, else a contiguous copy."""
    if t.is_contiguous() or (t.ndim == 4 and t.is_contiguous(memory_format=torch.channels_last)) \
            or (t.ndim == 5 and t.is_contiguous(memory_format=torch.channels_last_3d)):
        return t
    return t.contiguous()


# what some kernels need of the layouts of their arguments (by position) beyond density, where eager
# always hands them tensors laid out so but squall may not: a fused forward returns the values only
# its backward reads in the layout its kernels chose, and the torch plan's gradients stay contiguous.
# Each entry is (made contiguous, made contiguous unless all laid out alike).
# - The normalisations' backward kernels read their forward's saved statistics (mean, rstd) in memory
#   order whatever their strides: a channels-last layer norm's mean, (N, H, W, 1) with strides
#   (HW, 1, H, H), is channels-last "dense", and the kernel paired each row with another row's
#   statistics, silently (convnextv2's stem gradients off by half their size). (CUDA's RMS norm
#   backward is layer norm's kernel without the mean.)
# - CPU group norm's backward reads its gradient in its input's layout: a channels-last input with a
#   contiguous gradient, or the reverse, gave other gradients, silently.
# - nll_loss2d's backward raises "grad_input must be contiguous" for a channels-last input.
# A copy where one is needed; a no-op otherwise.
KERNEL_LAYOUT_NEEDS = {
    native_layer_norm_backward.id: ((3, 4), ()),
    native_group_norm_backward.id: ((2, 3), (0, 1)),
    fused_rms_norm_backward.id: ((3,), ()),
    nll_loss2d_backward.id: ((1,), ()),
}


def _kernel_impl(sym: Symbol) -> Callable:
    """The callable the torch executor runs for the backward kernel `sym` (its aten op, with the
    arguments its kernels need laid out otherwise copied first)."""
    kernel = sym.torchfns[0]
    if sym.id in KERNELS_WITH_UNIT_LAST_STRIDE:
        return _with_unit_last_stride(kernel, _BIAS_ARGUMENT.get(sym.id))
    if sym.id in CPU_FLASH_KERNELS:
        return _with_unit_last_stride(kernel, below_autograd=False, only=CPU_FLASH_KERNELS[sym.id])
    if sym.id in KERNELS_CALLED_WITH_VIEWS:
        return kernel
    return _with_dense_tensors(kernel, *KERNEL_LAYOUT_NEEDS.get(sym.id, ((), ())))


# each backward kernel's callable, by id: what the torch executor runs, and what a fusion region's
# torch calls run (a region's inputs are its fused neighbours' outputs, laid out as their kernels chose)
KERNEL_IMPLS: dict[str, Callable] = {sym.id: _kernel_impl(sym) for sym in all_kernels().values()}


def make_executor() -> TorchExecutor:
    """A fresh torch executor."""
    return TorchExecutor()


# --- plugin registration: the torch executor enters the marketplace exactly as a plugin does ---
@hookimpl
def squall_register_executors(operations: OperationRegistry) -> list[TorchExecutor]:
    """The built-in torch executor; it also runs every custom operation that has a torch reference."""
    ex = make_executor()
    for op in operations:
        if op.reference is not None:
            ex.register_implementation(op.symbol, op.reference)
    return [ex]
