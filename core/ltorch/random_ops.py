"""Torch-language ops that draw random numbers: rand/randn/randint(_like), normal, bernoulli, dropout.

The decompositions draw from the `uniform` and `normal` prims, which use torch's
global generator, so `torch.manual_seed` makes a compiled program reproducible. Run
whole by the torch executor, an op calls the torch function it stands for and draws
exactly eager's numbers; decomposed, it draws the same distribution, not the same
numbers. `generator=` objects are not supported (seed the global generator instead).
"""
from __future__ import annotations

import torch

from .. import prims
from .base import torchsymbol
from .functionalization import TorchForm, inplace
from .factories import check_factory_kwargs, factory_device, parse_size
from .helpers import broadcast, broadcast_shapes, broadcast_to, check, computation_dtype, is_number, is_tensor, torch_type_name
from ..proxies import TensorProxy
from ..symbol import Tags

__all__ = [
    "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "normal", "bernoulli",
    "uniform_like", "normal_like", "bernoulli_like", "uniform_", "normal_", "bernoulli_", "dropout",
    "dropout_functional",
]

_RANDOM = (Tags.RANDOM,)


def _check_random_dtype(kernel: str, dtype: torch.dtype) -> None:
    check(dtype.is_floating_point, lambda: f'"{kernel}" not implemented for \'{torch_type_name(dtype)}\'', NotImplementedError)


def _uniform(shape, low, high, *, device, dtype) -> TensorProxy:
    """uniform [low, high) of `dtype`; low-precision floats are drawn in float32 and rounded."""
    compute = computation_dtype(dtype)
    u = prims.uniform(tuple(shape), low, high, device=device, dtype=compute)
    return u if compute == dtype else prims.convert_element_type(u, dtype)


def _standard_normal(shape, *, device, dtype) -> TensorProxy:
    compute = computation_dtype(dtype)
    z = prims.normal(tuple(shape), 0.0, 1.0, device=device, dtype=compute)
    return z if compute == dtype else prims.convert_element_type(z, dtype)


# --- rand, randn, randint ------------------------------------------------------------------


@torchsymbol(torch.rand, tags=_RANDOM)
def rand(*size_args, size=None, generator=None, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
    """Uniform samples in [0, 1)."""
    check_factory_kwargs("rand", layout=layout, out=out, pin_memory=pin_memory, requires_grad=requires_grad, generator=generator)
    dtype = torch.get_default_dtype() if dtype is None else dtype
    _check_random_dtype("check_uniform_bounds", dtype)
    return _uniform(parse_size("rand", size_args, size), 0.0, 1.0, device=factory_device(device), dtype=dtype)


@torchsymbol(torch.randn, tags=_RANDOM)
def randn(*size_args, size=None, generator=None, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
    """Standard normal samples."""
    check_factory_kwargs("randn", layout=layout, out=out, pin_memory=pin_memory, requires_grad=requires_grad, generator=generator)
    dtype = torch.get_default_dtype() if dtype is None else dtype
    _check_random_dtype("normal_kernel_cpu", dtype)
    return _standard_normal(parse_size("randn", size_args, size), device=factory_device(device), dtype=dtype)


def _randint_values(shape, low: int, high: int, *, device, dtype) -> TensorProxy:
    check(low < high, lambda: f"random_ expects 'from' to be less than 'to', but got from={low} >= to={high}", RuntimeError)
    check(
        dtype != torch.bool or (low >= 0 and high <= 2),
        lambda: f"{'to - 1' if high > 2 else 'from'} is out of bounds for bool",
        RuntimeError,
    )
    # floor of a float64 uniform in [low, high): each integer of [low, high) equally likely
    u = prims.uniform(tuple(shape), float(low), float(high), device=device, dtype=torch.float64)
    return prims.convert_element_type(prims.floor(u), dtype)


@torchsymbol(torch.randint, tags=_RANDOM)
def randint(*args, low=None, high=None, size=None, generator=None, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
    """Integers uniform in [low, high): randint(high, size) or randint(low, high, size)."""
    check_factory_kwargs("randint", layout=layout, out=out, pin_memory=pin_memory, requires_grad=requires_grad, generator=generator)
    positional = list(args)
    if size is None and positional:
        size = positional.pop()
    if high is None and positional:
        high = positional.pop()
    if low is None:
        low = positional.pop() if positional else 0
    check(not positional and high is not None and size is not None, lambda: "randint() expects (high, size) or (low, high, size)", TypeError)
    for what, v in (("low", low), ("high", high)):
        check(isinstance(v, int) and not isinstance(v, bool), lambda: f"randint(): argument '{what}' must be int, not {type(v).__name__}", TypeError)
    dtype = torch.int64 if dtype is None else dtype
    return _randint_values(parse_size("randint", (size,)), low, high, device=factory_device(device), dtype=dtype)


def _like(name: str, input, dtype, device):
    check(is_tensor(input), lambda: f"{name}(): argument 'input' must be Tensor, not {type(input).__name__}", TypeError)
    return (input.dtype if dtype is None else dtype), (input.device if device is None else factory_device(device))


@torchsymbol(torch.rand_like, tags=_RANDOM)
def rand_like(input, *, generator=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False, memory_format=None):
    """Uniform [0, 1) samples shaped like `input`."""
    check_factory_kwargs("rand_like", layout=layout, pin_memory=pin_memory, requires_grad=requires_grad, generator=generator)
    dtype, device = _like("rand_like", input, dtype, device)
    _check_random_dtype("check_uniform_bounds", dtype)
    return _uniform(input.shape, 0.0, 1.0, device=device, dtype=dtype)


@torchsymbol(torch.randn_like, tags=_RANDOM)
def randn_like(input, *, generator=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False, memory_format=None):
    """Standard normal samples shaped like `input`."""
    check_factory_kwargs("randn_like", layout=layout, pin_memory=pin_memory, requires_grad=requires_grad, generator=generator)
    dtype, device = _like("randn_like", input, dtype, device)
    _check_random_dtype("normal_kernel_cpu", dtype)
    return _standard_normal(input.shape, device=device, dtype=dtype)


@torchsymbol(torch.randint_like, tags=_RANDOM)
def randint_like(input, low=0, high=None, *, generator=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False, memory_format=None):
    """Integers in [low, high) shaped like `input`, of its dtype: randint_like(x, high) or (x, low, high)."""
    check_factory_kwargs("randint_like", layout=layout, pin_memory=pin_memory, requires_grad=requires_grad, generator=generator)
    if high is None:
        low, high = 0, low
    dtype, device = _like("randint_like", input, dtype, device)
    return _randint_values(input.shape, int(low), int(high), device=device, dtype=dtype)


# --- normal, bernoulli ------------------------------------------------------------------------


@torchsymbol(torch.normal, tags=_RANDOM)
def normal(mean=0.0, std=1.0, size=None, *, generator=None, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
    """Normal samples: numbers mean/std with size=, or tensors (broadcast together) for either."""
    check_factory_kwargs("normal", layout=layout, out=out, pin_memory=pin_memory, requires_grad=requires_grad, generator=generator)
    if not is_tensor(mean) and not is_tensor(std):
        check(size is not None, lambda: "normal() with number mean and std needs a size", TypeError)
        check(std >= 0, lambda: f"normal expects std >= 0.0, but found std {std}", RuntimeError)
        dtype = torch.get_default_dtype() if dtype is None else dtype
        _check_random_dtype("normal_kernel_cpu", dtype)
        z = _standard_normal(parse_size("normal", (size,)), device=factory_device(device), dtype=dtype)
        return _affine(z, mean, std)
    like = mean if is_tensor(mean) else std
    _check_random_dtype("normal_kernel_cpu", like.dtype)
    shape = broadcast_shapes(*(t.shape for t in (mean, std) if is_tensor(t)))
    z = _standard_normal(shape, device=like.device, dtype=like.dtype)
    return _affine(z, mean, std)


def _affine(z: TensorProxy, mean, std) -> TensorProxy:
    """mean + std * z, computed in float32 for low-precision z, broadcasting tensor parameters."""
    compute = computation_dtype(z.dtype)
    cast = lambda x: (prims.convert_element_type(x, compute) if x.dtype != compute else x) if is_tensor(x) else float(x)
    zc, m, s = broadcast(cast(z), cast(mean), cast(std))
    out = prims.add(prims.mul(zc, s) if is_tensor(zc) else zc, m)
    return out if out.dtype == z.dtype else prims.convert_element_type(out, z.dtype)


@torchsymbol(torch.bernoulli, torch.Tensor.bernoulli, tags=_RANDOM)
def bernoulli(input, p=None, *, generator=None, out=None):
    """1 with probability p (input's values, or the number p), else 0, in input's dtype."""
    check_factory_kwargs("bernoulli", out=out, generator=generator)
    check(is_tensor(input), lambda: f"bernoulli(): argument 'input' must be Tensor, not {type(input).__name__}", TypeError)
    _check_random_dtype("bernoulli_tensor_cpu_p_", input.dtype)
    return _bernoulli_like(input, input if p is None else p)


def _bernoulli_like(a: TensorProxy, p) -> TensorProxy:
    """A 0/1 tensor shaped like `a` (a's dtype): 1 where a uniform draw falls below p."""
    compute = computation_dtype(a.dtype) if a.dtype.is_floating_point else torch.float32
    u = prims.uniform(tuple(a.shape), 0.0, 1.0, device=a.device, dtype=compute)
    if is_tensor(p):
        p = broadcast_to(p if p.dtype == compute else prims.convert_element_type(p, compute), a.shape)
    else:
        check(is_number(p) and 0 <= p <= 1, lambda: f"bernoulli_ expects p to be in [0, 1], but got p={p}", RuntimeError)
        p = float(p)
    return prims.convert_element_type(prims.lt(u, p), a.dtype)


# --- in-place samplers: each runs in torch as the method on a fresh tensor ------------------


def _torch_uniform(input, *args, **kwargs):
    return torch.empty_like(input).uniform_(*args, **kwargs)


def _torch_normal(input, *args, **kwargs):
    return torch.empty_like(input).normal_(*args, **kwargs)


def _torch_bernoulli(input, *args, **kwargs):
    return torch.empty_like(input).bernoulli_(*args, **kwargs)


@torchsymbol(_torch_uniform, id="ltorch.uniform_like", tags=_RANDOM)
def uniform_like(input, *args, generator=None, **kwargs):
    """The value Tensor.uniform_(from=0, to=1) gives `input`: uniform samples in [from, to)."""
    check_factory_kwargs("uniform_", generator=generator)
    bounds = dict(zip(("from", "to"), args), **kwargs)
    low, high = bounds.get("from", 0.0), bounds.get("to", 1.0)
    check(low <= high, lambda: f"uniform_ expects to return a [from, to) range, but found from={low} > to={high}", RuntimeError)
    _check_random_dtype("check_uniform_bounds", input.dtype)
    return _uniform(input.shape, float(low), float(high), device=input.device, dtype=input.dtype)


@torchsymbol(_torch_normal, id="ltorch.normal_like", tags=_RANDOM)
def normal_like(input, mean=0.0, std=1.0, *, generator=None):
    """The value Tensor.normal_(mean, std) gives `input`."""
    check_factory_kwargs("normal_", generator=generator)
    check(std >= 0, lambda: f"normal expects std >= 0.0, but found std {std}", RuntimeError)
    _check_random_dtype("normal_kernel_cpu", input.dtype)
    return _affine(_standard_normal(input.shape, device=input.device, dtype=input.dtype), mean, std)


@torchsymbol(_torch_bernoulli, id="ltorch.bernoulli_like", tags=_RANDOM)
def bernoulli_like(input, p=0.5, *, generator=None):
    """The value Tensor.bernoulli_(p) gives `input`: 0/1 with probability p (a number or a tensor)."""
    check_factory_kwargs("bernoulli_", generator=generator)
    return _bernoulli_like(input, p)


uniform_ = inplace(uniform_like, torch.Tensor.uniform_)
normal_ = inplace(normal_like, torch.Tensor.normal_)
bernoulli_ = inplace(bernoulli_like, torch.Tensor.bernoulli_, checks_overlap=True)


# --- dropout -------------------------------------------------------------------------------


@torchsymbol(torch.dropout, id="torch.nn.functional.dropout", tags=_RANDOM)
def dropout(input, p, train):
    """Zero each element with probability p and scale the rest by 1/(1-p) (identity when not training)."""
    check(p >= 0.0 and p <= 1.0, lambda: f"dropout probability has to be between 0 and 1, but got {p}", RuntimeError)
    check(is_tensor(input), lambda: f"dropout(): argument 'input' must be Tensor, not {type(input).__name__}", TypeError)
    if not train or p == 0:
        return input
    check(
        input.dtype.is_floating_point or input.dtype.is_complex,
        lambda: f"result type Float can't be cast to the desired output type {torch_type_name(input.dtype)}",
        RuntimeError,
    )
    if p == 1:
        # torch multiplies by zero (so NaN and inf inputs give NaN), drawing nothing
        return prims.mul(input, 0.0)
    # torch's kernel: a bernoulli(1 - p) mask in input's dtype, divided by 1 - p, times input
    u = _uniform(input.shape, 0.0, 1.0, device=input.device, dtype=input.dtype)
    keep = prims.convert_element_type(prims.lt(u, 1.0 - p), input.dtype)
    return prims.mul(input, prims.div(keep, 1.0 - p))


def _check_dropout_p(input, p=0.5, training=True, inplace=False) -> None:
    # torch.nn.functional.dropout checks p itself, with ValueError (torch.dropout's is a RuntimeError)
    check(p >= 0.0 and p <= 1.0, lambda: f"dropout probability has to be between 0 and 1, but got {p}", ValueError)


# torch.nn.functional.dropout (and nn.Dropout): the dropout op, written into its input when inplace=True
dropout_functional = TorchForm(dropout, torch.nn.functional.dropout, before=_check_dropout_p, writes=0, flag="inplace")
