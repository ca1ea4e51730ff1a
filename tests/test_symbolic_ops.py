"""Ops over a symbolic size compile once for every length (issue 20): each case read the size's
exact value somewhere in its meta function, decomposition or grad rule (`float(n)`, a count
divided by, `int(n)`), so the symbolic trace was thrown away and every length compiled anew
(5 compiles for 4 lengths under `dynamic=True`). Each case checks eager's answers (and
gradients where differentiable) at every length, 1 and 2 included, and the compile count."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close
from torch.utils._pytree import tree_leaves

import squall

LENGTHS = (3, 5, 8, 13)


def _floats(args):
    return [a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]


def _check(fn, make, *, grad: bool, lengths=LENGTHS, small=(2, 1), compiles=1):
    """`fn` jitted with every size symbolic: eager's answers (and gradients with `grad`) at each
    of `lengths` and then `small`, and `compiles` compiles over `lengths`."""
    jf = squall.jit(fn, dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)
        for i, n in enumerate((*lengths, *small)):
            torch.manual_seed(n)
            args = make(n)
            eager_args, jit_args = (_floats(args), _floats(args)) if grad else (args, args)
            expected, out = fn(*eager_args), jf(*jit_args)
            assert_close(out, expected, equal_nan=True)
            if grad:
                leaves = [a for a in eager_args if isinstance(a, torch.Tensor) and a.requires_grad]
                jit_leaves = [a for a in jit_args if isinstance(a, torch.Tensor) and a.requires_grad]
                outs, expecteds = tree_leaves(out), tree_leaves(expected)
                cotangents = [torch.randn_like(e) for e in expecteds]
                assert_close(torch.autograd.grad(outs, jit_leaves, cotangents), torch.autograd.grad(expecteds, leaves, cotangents), equal_nan=True)
            if i == len(lengths) - 1:
                assert jf.cache_info().misses == compiles


@pytest.fixture(autouse=True)
def _no_remembered_dims(monkeypatch):
    # what earlier jits of the same code learned would make a case's first call symbolic anyway
    monkeypatch.setenv("SQUALL_REMEMBER_DYNAMIC", "0")


# --- norms over a symbolic normalized size: the count divided by was read as a float ---------------

_NORMS = {
    "layer_norm over its last dim": (lambda x: F.layer_norm(x, (x.shape[-1],)), lambda n: (torch.randn(4, n),)),
    "layer_norm affine": (lambda x, w, b: F.layer_norm(x, (x.shape[-1],), w, b), lambda n: (torch.randn(4, n), torch.randn(n), torch.randn(n))),
    "layer_norm over a batch": (lambda x: F.layer_norm(x, (4,)), lambda n: (torch.randn(n, 4),)),
    "rms_norm": (lambda x, w: F.rms_norm(x, (x.shape[-1],), w), lambda n: (torch.randn(4, n), torch.randn(n))),
    "group_norm": (lambda x, w, b: F.group_norm(x, 2, w, b), lambda n: (torch.randn(2, 4, n), torch.randn(4), torch.randn(4))),
    "var": (lambda x: x.var(-1), lambda n: (torch.randn(4, n),)),
    "std, no correction": (lambda x: x.std(-1, correction=0), lambda n: (torch.randn(4, n),)),
    "instance_norm": (lambda x: F.instance_norm(x), lambda n: (torch.randn(2, 4, n),)),
}


@pytest.mark.parametrize("name", sorted(_NORMS))
def test_a_norm_over_a_symbolic_size_compiles_once_with_eager_s_values_and_gradients(name):
    fn, make = _NORMS[name]
    # instance norm refuses one spatial element in training, as eager does: no length 1 there
    _check(fn, make, grad=True, small=(2,) if name == "instance_norm" else (2, 1))


def test_layer_norm_training_over_a_changing_hidden_size_under_the_default_policy_compiles_twice():
    # the first call static, the second symbolic: the same program for every later size
    def norm(x, w, b):
        return F.layer_norm(x, (x.shape[-1],), w, b)

    jf = squall.jit(norm)
    for n in (*LENGTHS, 21, 2):
        args = (torch.randn(4, n), torch.randn(n), torch.randn(n))
        eager_args, jit_args = _floats(args), _floats(args)
        expected, out = norm(*eager_args), jf(*jit_args)
        assert_close(out, expected)
        cotangent = torch.randn_like(expected)
        assert_close(torch.autograd.grad(out, jit_args, cotangent), torch.autograd.grad(expected, eager_args, cotangent))
    assert jf.cache_info().misses == 2  # one a size before (training: its grad rule read the count)


# --- a size that was read where the op can carry it: a scaled size, a fill value, linspace's steps ---

_SIZED = {
    # floor(L * 2) as the size 2*s0, not floor(float(L) * 2.0) of its value
    "interpolate nearest x2": (lambda x: F.interpolate(x, scale_factor=2), lambda n: (torch.randn(1, 2, n),), True),
    "interpolate linear x1.5": (lambda x: F.interpolate(x, scale_factor=1.5, mode="linear"), lambda n: (torch.randn(1, 2, n),), True),
    "interpolate nearest-exact x0.5": (lambda x: F.interpolate(x, scale_factor=0.5, mode="nearest-exact"), lambda n: (torch.randn(1, 2, n),), False),
    "interpolate bilinear x2": (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), lambda n: (torch.randn(1, 2, n, 5),), True),
    "interpolate bilinear x2 corners aligned": (lambda x: F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True), lambda n: (torch.randn(1, 2, n, 5),), True),
    "interpolate bicubic x1.5 corners aligned": (lambda x: F.interpolate(x, scale_factor=1.5, mode="bicubic", align_corners=True), lambda n: (torch.randn(1, 2, n, n),), True),
    # to another tensor's size (a U-Net's skip connection): the ratio computed by the program as
    # the kernel does, (float) L / out (bitwise eager's over 42 pairs of sizes, 1d and 2d)
    "interpolate nearest to a size": (lambda x, y: F.interpolate(x, size=y.shape[-1]), lambda n: (torch.randn(1, 2, n), torch.zeros(1, 1, 2 * n + 1, dtype=torch.long)), True),
    "interpolate linear to a size": (lambda x, y: F.interpolate(x, size=y.shape[-1], mode="linear"), lambda n: (torch.randn(1, 2, n), torch.zeros(1, 1, 3 * n - 1, dtype=torch.long)), True),
    "interpolate bicubic to a size": (lambda x, y: F.interpolate(x, size=y.shape[-2:], mode="bicubic"), lambda n: (torch.randn(1, 2, n, 7), torch.zeros(1, 1, 2 * n + 3, 11, dtype=torch.long)), False),
    "interpolate with its scale recomputed": (lambda x: F.interpolate(x, scale_factor=1.5, recompute_scale_factor=True), lambda n: (torch.randn(1, 2, n),), False),
    # a size as a fill value: filled with this call's value, not a constant of the traced one
    "full with a size": (lambda x: x.sum() + torch.full((2,), x.shape[1]), lambda n: (torch.randn(6, n),), False),
    "full float16 with a size": (lambda x: torch.full((2, x.shape[1]), x.shape[1], dtype=torch.float16), lambda n: (torch.randn(6, n),), False),
    "new_full with a size": (lambda x: x * x.new_full((1,), x.shape[1] * 2), lambda n: (torch.randn(6, n),), True),
    "complex full with a size": (lambda x: torch.full((2, x.shape[1]), x.shape[1], dtype=torch.complex64), lambda n: (torch.randn(6, n),), False),
    "complex times a size": (lambda x: (x * 1j + x.shape[1]) / x.shape[1], lambda n: (torch.randn(6, n),), False),
    # replicate padding by a size: the edge broadcast to it, not a list of that many slices
    "pad replicate by a size": (lambda x: F.pad(x, (1, x.shape[-1] // 2), mode="replicate"), lambda n: (torch.randn(2, 6, n),), True),
    # the step computed by the program from steps, in the kernel's dtype (bitwise eager's)
    "linspace over a size": (lambda x: x + torch.linspace(-3.3, 7.1, x.shape[-1]), lambda n: (torch.randn(6, n),), True),
    "linspace int64 over a size": (lambda x: torch.linspace(0, 100, x.shape[-1], dtype=torch.int64), lambda n: (torch.randn(6, n),), False),
}


@pytest.mark.parametrize("name", sorted(_SIZED))
def test_an_op_given_a_symbolic_size_compiles_once_with_eager_s_values(name):
    fn, make, grad = _SIZED[name]
    # a scale of 0.5 makes 0 of 1: an error in eager and squall alike, so no length 1 there
    _check(fn, make, grad=grad, small=(2,) if "x0.5" in name else (2, 1))


def test_split_into_chunks_of_a_size_compiles_once_per_number_of_chunks():
    # how many pieces is the program's structure: guarded as the relation (s0 + 1) // 2 == 3,
    # not the length's value, so 5 and 6 share a program (the last piece 1 or 2 long), as do 7 and 8
    def pieces(x):
        return [p * i for i, p in enumerate(x.split(2, 1))]

    _check(pieces, lambda n: (torch.randn(3, n),), grad=False, lengths=(5, 6, 7, 8), compiles=2)  # 5 before

    def chunked(x):
        return [p.sum(0) for p in x.split(3)]

    _check(chunked, lambda n: (torch.randn(n, 10),), grad=True, lengths=(7, 8, 9, 4, 5, 6), compiles=2)


def test_a_split_into_thirds_of_a_symbolic_width_compiles_once():
    # the piece count, (4*s0 - 1) // s0 == 3, holds for every width: one program (one per width before)
    def attention_like(x):
        q, k, v = x.split(x.shape[-1] // 3, -1)
        return q * k + v

    _check(attention_like, lambda n: (torch.randn(2, 3 * n),), grad=True, small=(1,))


def test_tensor_split_into_sections_compiles_once_over_lengths():
    # piece i is ceil((length - i) / 3) long: the first length % 3 pieces one longer, no value read
    def thirds(x):
        return [p * (i + 1) for i, p in enumerate(torch.tensor_split(x, 3, 1))]

    _check(thirds, lambda n: (torch.randn(2, n),), grad=True, lengths=(3, 5, 7, 8, 13), small=(2, 1))


# --- torch calls that run opaque: the meta device learnt their outputs at sizes read and guarded ---

_OPAQUE = {
    "kthvalue": (lambda x: x.kthvalue(2, -1), lambda n: (torch.randn(6, n),), False),
    "kthvalue keepdim": (lambda x: torch.kthvalue(x, 1, 0, keepdim=True), lambda n: (torch.randn(n, 6),), False),
    "kthvalue at a symbolic k": (lambda x: x.kthvalue((x.shape[-1] + 1) // 2, -1), lambda n: (torch.randn(6, n),), False),
    "median along a dim": (lambda x: x.median(1), lambda n: (torch.randn(6, n),), False),
    "median of all": (lambda x: x.median() + x.shape[1], lambda n: (torch.randn(6, n),), False),
    "mode": (lambda x: torch.mode(x, -1), lambda n: (torch.randint(0, 3, (6, n)).float(),), False),
    "cummax": (lambda x: x.cummax(1).values * 2, lambda n: (torch.randn(6, n),), True),
    "cummin's indices gathered": (lambda x: x.gather(1, x.cummin(1).indices), lambda n: (torch.randn(6, n),), True),
    "logcumsumexp": (lambda x: torch.logcumsumexp(x, dim=1), lambda n: (torch.randn(6, n),), True),
    "diag_embed": (lambda x: torch.diag_embed(x) * 3, lambda n: (torch.randn(6, n),), True),
    "diag_embed off the diagonal": (lambda x: x.diag_embed(-1, 0, 2), lambda n: (torch.randn(6, n),), False),
    "real of a complex full": (lambda x: x * torch.full((x.shape[-1],), 1 + 2j).real, lambda n: (torch.randn(6, n),), True),
    "imag of a complex tensor": (lambda x: (x.to(torch.complex64) * (2 - 1j)).imag, lambda n: (torch.randn(6, n),), True),
    "view_as_real": (lambda x: torch.view_as_real(x.to(torch.complex64) * (1 + 3j)), lambda n: (torch.randn(n, 6),), True),
}


@pytest.mark.parametrize("name", sorted(_OPAQUE))
def test_an_opaque_call_with_a_known_output_shape_compiles_once_over_symbolic_sizes(name):
    fn, make, grad = _OPAQUE[name]
    # kthvalue's k past the end is torch's error, at every length: no length 1 for k == 2
    _check(fn, make, grad=grad, small=(2,) if name == "kthvalue" else (2, 1))


def test_kthvalue_at_a_symbolic_k_past_the_length_is_eager_s_error():
    # k = length - 3 relies on 1 <= k (a shape guard): a length of 3 or less runs anew and raises as eager
    fn = lambda x: x.kthvalue(x.shape[-1] - 3, -1)
    jf = squall.jit(fn, dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)
        for n in (5, 8, 11):
            x = torch.randn(6, n)
            assert_close(jf(x), fn(x))
        assert jf.cache_info().misses == 1
        with pytest.raises(RuntimeError, match="out of range"):
            jf(torch.randn(6, 3))


def test_kthvalue_past_a_symbolic_length_is_eager_s_error():
    # the program relies on k <= the length (a shape guard): a shorter call runs eagerly and raises there
    jf = squall.jit(lambda x: x.kthvalue(3, -1), dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)
        for n in (5, 8):
            x = torch.randn(6, n)
            assert_close(jf(x), x.kthvalue(3, -1))
        with pytest.raises(RuntimeError, match="out of range"):
            jf(torch.randn(6, 2))
    assert jf.cache_info().misses == 1



_ADAPTIVE = {  # (the function, whether its gradients are checked too)
    "avg 1d": (lambda x: F.adaptive_avg_pool1d(x, 4), True),
    "avg 2d": (lambda x: F.adaptive_avg_pool2d(x, (1, 4)), True),
    "area interpolate": (lambda x: F.interpolate(x[None], size=(3, 4), mode="area"), True),
    "max 1d": (lambda x: F.adaptive_max_pool1d(x, 4), True),
    "max 1d with indices": (lambda x: F.adaptive_max_pool1d(x, 4, return_indices=True)[1], False),
}


@pytest.mark.parametrize("name", sorted(_ADAPTIVE))
def test_adaptive_pooling_over_uneven_symbolic_lengths_compiles_once(name):
    # cells of unequal widths (the length not a multiple of 4): the widest cell is bounded, not read
    fn, grad = _ADAPTIVE[name]
    _check(fn, lambda n: (torch.randn(2, 2, n),), grad=grad, lengths=(5, 7, 11, 13), small=(3, 2, 1))
