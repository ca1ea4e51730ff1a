"""Grad rules for reduction, scan, selection and linear-algebra prims.

Where PyTorch's backward branches on data (prod and cumprod with zeros in the input),
these rules compute every branch with prims and select with `where`, so a trace
never depends on values it cannot know.
"""
from __future__ import annotations

from collections.abc import Callable

from ... import prims
from ...ltorch.helpers import count_operand, times_ratio
from ...prims.base import PrimIDs
from ...proxies import TensorProxy
from ...symbolic import SymInt
from ..gradients import GradCall
from .support import expand, last_two_swapped, moved_last, per_argument, real_only, restored, zeros

__all__ = ["reduction_rules"]


@per_argument
def _sum(call: GradCall) -> tuple:
    a, dims = call.args
    return expand(call.g, a.shape, dims), None


def _exclusive_cumprod(x: TensorProxy, dim: int, *, reverse: bool = False) -> TensorProxy:
    """prod of x[..., :i] (or x[..., i+1:] when `reverse`) at each i along `dim`; no division, so zeros are safe."""
    if reverse:
        x = prims.flip(x, (dim,))
    config = [(0, 0, 0)] * x.ndim
    config[dim] = (1, -1, 0)  # shift right by one, a 1 entering: the product before i
    out = prims.cumprod(prims.pad(x, 1, config), dim)
    return prims.flip(out, (dim,)) if reverse else out


@per_argument
def _prod(call: GradCall) -> tuple:
    a, dims = call.args
    if not dims:
        return call.g, None
    # PyTorch's prod_backward branches on the zeros of the whole input: with none, g * out / a
    # (so an infinite or overflowing factor gives what the division gives); with some, the product
    # of the others, a prefix product times a suffix product (no division, zeros are safe); and
    # the product of every element (torch.prod(x), here all dims) with two or more zeros, zeros
    flat, perm = moved_last(a, dims)
    last = flat.ndim - 1
    others = prims.mul(_exclusive_cumprod(flat, last), _exclusive_cumprod(flat, last, reverse=True))
    g = prims.broadcast_in_dim(call.g, tuple(flat.shape), tuple(range(last)))
    with_zeros = restored(prims.mul(g, others), a, perm)
    every = tuple(range(a.ndim))
    zero_count = prims.sum(prims.convert_element_type(prims.eq(a, 0), a.dtype), every)
    zero_count = prims.broadcast_in_dim(zero_count, tuple(a.shape), ())
    divided = prims.div(prims.mul(expand(call.g, a.shape, dims), expand(call.output, a.shape, dims)), a)
    grad = prims.where(prims.eq(zero_count, 0), divided, with_zeros)
    if len(dims) == a.ndim:
        grad = prims.where(prims.gt(zero_count, 1), 0.0, grad)
    return grad, None


@per_argument
def _amax_amin(call: GradCall) -> tuple:
    a, dims = call.args
    # the gradient goes to the elements equal to the result, split evenly among ties (as PyTorch)
    chosen = prims.convert_element_type(prims.eq(a, expand(call.output, a.shape, dims)), a.dtype)
    share = prims.div(call.g, prims.sum(chosen, dims))
    return prims.mul(expand(share, a.shape, dims), chosen), None


def _var(call: GradCall) -> tuple:
    (a,) = call.inputs
    dims, correction = call.args[1], call.kwargs["correction"]
    n = 1
    for d in dims:
        n *= a.shape[d]
    mean = expand(prims.div(prims.sum(a, dims), count_operand(n)), a.shape, dims)
    # 2 (a - mean) / (n - correction); PyTorch divides by zero too when n == correction
    centered = prims.sub(a, mean)
    if type(n) is SymInt and type(correction) is int:
        # the program divides by this call's n - correction, not by its value read (a compile per
        # size); whether they are equal is a shape guard (n == 1 with correction 1: inf, as PyTorch)
        scaled = times_ratio(centered, 2, n - correction) if n != correction else prims.mul(centered, float("inf"))
    else:
        scaled = prims.mul(centered, 2.0 / (n - correction) if n != correction else float("inf"))
    return (prims.mul(expand(call.g, a.shape, dims), scaled),)


def _reverse_cumsum(x: TensorProxy, dim: int) -> TensorProxy:
    return prims.flip(prims.cumsum(prims.flip(x, (dim,)), dim), (dim,))


@per_argument
def _cumsum(call: GradCall) -> tuple:
    a, dim = call.args
    return _reverse_cumsum(call.g, dim), None


@per_argument
def _cumprod(call: GradCall) -> tuple:
    a, dim = call.args
    g, out = call.g, call.output
    if a.ndim == 0 or a.shape[dim] == 1:  # eager passes g through (out / a is NaN at 0 and inf)
        return g, None
    # PyTorch's cumprod_backward, term for term (its masks decide where a NaN from 0 * inf lands):
    # before the first zero of a run along dim, grad_i = sum_{j in [i, z1)} g_j out_j / a_i.
    # At the first zero z1, out[z1 - 1] * sum_{j in [z1, z2)} g_j prod_{k in (z1, j]} a_k.
    # After it, every product a_i enters also holds a_z1 = 0: the gradient is 0.
    is_zero = prims.eq(a, 0)
    zeros_so_far = prims.cumsum(prims.convert_element_type(is_zero, a.dtype), dim)
    before_zero = prims.eq(zeros_so_far, 0)
    up_to_second_zero = prims.eq(zeros_so_far, 1)
    first_zero = prims.logical_and(is_zero, up_to_second_zero)
    in_stretch = prims.where(before_zero, prims.mul(g, out), 0.0)
    divided = prims.div(_reverse_cumsum(in_stretch, dim), prims.where(before_zero, a, 1.0))
    between_zeros = prims.logical_and(up_to_second_zero, prims.logical_not(is_zero))
    products = prims.cumprod(prims.where(between_zeros, a, 1.0), dim)
    terms = prims.sum(prims.mul(products, prims.where(up_to_second_zero, g, 0.0)), (dim,))
    config = [(0, 0, 0)] * out.ndim
    config[dim] = (1, -1, 0)  # out[i - 1], 1 at i = 0
    at_zero = prims.mul(expand(terms, a.shape, (dim,)), prims.pad(out, 1.0, config))
    return prims.where(before_zero, divided, prims.where(first_zero, at_zero, 0.0)), None


def _topk(call: GradCall) -> tuple:
    a, k, dim, largest, sorted = call.args
    return (prims.scatter_add(zeros(a), call.output[1], call.cotangents[0], dim),)


def _sort(call: GradCall) -> tuple:
    a, dim, descending, stable = call.args
    return (prims.scatter_add(zeros(a), call.output[1], call.cotangents[0], dim),)


def _outer(x: TensorProxy, y: TensorProxy) -> TensorProxy:
    shape = (x.shape[0], y.shape[0])
    return prims.mul(prims.broadcast_in_dim(x, shape, (0,)), prims.broadcast_in_dim(y, shape, (1,)))


@per_argument
def _matmul(call: GradCall) -> tuple:
    a, b = call.args
    g = call.g
    if a.ndim == 1 and b.ndim == 1:  # dot: g is a scalar
        return prims.mul(b, expand(g, b.shape, (0,))), prims.mul(a, expand(g, a.shape, (0,)))
    if a.ndim == 1:  # (k) @ (k, m) -> (m)
        return prims.matmul(b, g), _outer(a, g)
    if b.ndim == 1:  # (n, k) @ (k) -> (n)
        return _outer(g, b), prims.matmul(last_two_swapped(a), g)
    # 2-d, or batched with identical batch dims (the prim does not broadcast them)
    return prims.matmul(g, last_two_swapped(b)), prims.matmul(last_two_swapped(a), g)


def _weight_grad(x: TensorProxy, gy: TensorProxy, weight: TensorProxy, stride, padding, dilation, groups) -> TensorProxy:
    """d(sum gy * conv(x, W)) / dW for a (non-transposed) convolution, itself as a convolution.

    W[o, c, k] meets x[n, c, y*stride + k*dilation - padding] and gy[n, o, y]: a convolution
    over y with the batch as channels, x as input and gy as kernel, stride and dilation
    swapped. Groups become batch of that convolution via its own groups: input
    (C/G, G*N, ...), kernel (G*O/G, N, ...).
    """
    n, c = x.shape[0], x.shape[1]
    o = gy.shape[1]
    if n == 0:  # no batch: the kernel met nothing (and a convolution over 0 channels is ill-formed)
        return zeros(weight)
    spatial = x.shape[2:]
    cg = c // groups
    # x (N, G*Cg, *s) -> (Cg, G*N, *s)
    xt = prims.reshape(x, (n, groups, cg, *spatial))
    xt = prims.transpose(xt, (2, 1, 0, *range(3, x.ndim + 1)))
    xt = prims.reshape(xt, (cg, groups * n, *spatial))
    # gy (N, O, *s') -> (O, N, *s'): O is already group-major
    gyt = prims.transpose(gy, (1, 0, *range(2, gy.ndim)))
    out = prims.convolution(xt, gyt, None, tuple(dilation), tuple(padding), tuple(stride), False, (0,) * len(spatial), groups)
    # out (Cg, O, *k') with k' >= the kernel: the extra positions meet no output
    kernel = weight.shape[2:]
    if tuple(out.shape[2:]) != tuple(kernel):
        out = prims.slice(out, (0,) * out.ndim, (cg, o, *kernel), (1,) * out.ndim)
    return prims.transpose(out, (1, 0, *range(2, out.ndim)))


def _convolution(call: GradCall) -> tuple:
    a, weight, bias, stride, padding, dilation, transposed, output_padding, groups = call.args
    g = call.g
    nd = a.ndim - 2
    if not transposed:
        # the input's gradient is the transposed convolution of g; output_padding restores the
        # rows the forward's stride dropped
        recovered = [(y - 1) * s - 2 * p + d * (k - 1) + 1 for y, s, p, d, k in zip(g.shape[2:], stride, padding, dilation, weight.shape[2:])]
        extra = tuple(i - r for i, r in zip(a.shape[2:], recovered))
        ga = prims.convolution(g, weight, None, stride, padding, dilation, True, extra, groups)
        gw = _weight_grad(a, g, weight, stride, padding, dilation, groups)
    else:
        # a transposed convolution is the adjoint of the convolution with the same weight
        ga = prims.convolution(g, weight, None, stride, padding, dilation, False, (0,) * nd, groups)
        if tuple(ga.shape) != tuple(a.shape):  # output_padding rows beyond the last window
            ga = prims.slice(ga, (0,) * ga.ndim, tuple(a.shape), (1,) * ga.ndim)
        gw = _weight_grad(g, a, weight, stride, padding, dilation, groups)
    grads = [ga, gw]
    if bias is not None:
        grads.append(prims.sum(g, (0, *range(2, g.ndim))))
    return tuple(grads)


def reduction_rules() -> dict[str, Callable[[GradCall], tuple]]:
    """The rules of this module by prim id."""
    return {
        PrimIDs.SUM: _sum,
        PrimIDs.PROD: real_only("prims.prod", _prod),
        PrimIDs.AMAX: _amax_amin,
        PrimIDs.AMIN: _amax_amin,
        PrimIDs.VAR: real_only("prims.var", _var),
        PrimIDs.CUMSUM: _cumsum,
        PrimIDs.CUMPROD: real_only("prims.cumprod", _cumprod),
        PrimIDs.TOPK: _topk,
        PrimIDs.SORT: _sort,
        PrimIDs.MATMUL: _matmul,
        PrimIDs.CONVOLUTION: _convolution,
    }
