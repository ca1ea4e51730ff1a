"""Python arithmetic on symbolic sizes gives eager's numbers at every length.

A size times a float (`int(x.shape[1] * 0.5)`), a float scale from a size, bit shifts, rounding,
`str(n)` and `torch.tensor(x.shape)` used as data: each is traced (no fallback to eager, no
SquallWarning) and its value is computed from this call's size, guarded where it is read, so a
call at another length gets eager's answer, never the traced call's.
"""
from __future__ import annotations

import math
import warnings

import pytest
import torch

import squall
from squall.runtime.jit import jitted_state
from squall.symbolic import ShapeEnv, source

PROGRAMS = {
    "int_of_size_times_float": lambda x: x[:, : int(x.shape[1] * 0.5)],
    "size_times_float_scale": lambda x: x * (x.shape[1] * 0.125),
    "float_times_size": lambda x: x * (0.25 * x.size(-1)),
    "size_plus_float": lambda x: x * (x.shape[1] + 0.5),
    "float_minus_size": lambda x: x * (0.5 - x.shape[1]),
    "round_of_size_times_float": lambda x: x[:, : round(x.shape[1] * 0.7)],
    "trunc_of_size_times_float": lambda x: x * math.trunc(x.shape[1] * 0.3),
    "min_of_scaled_size": lambda x: x * min(x.shape[1] * 0.5, 3.0),
    "full_of_scaled_size": lambda x: x + torch.full((x.shape[1],), x.shape[1] * 0.5),
    "new_full_of_scaled_size": lambda x: x.new_full((2,), x.shape[1] * 0.5),
    "sqrt_of_size": lambda x: x / math.sqrt(x.size(-1)),
    "float_floordiv_size": lambda x: x * (100.0 // x.shape[1]),
    "float_mod_size": lambda x: x * (100.0 % x.shape[1]),
    "two_to_the_size": lambda x: x * 2 ** x.shape[1],
    "float_to_the_size": lambda x: x * 1.5 ** x.shape[1],
    "shifts_and_bits": lambda x: x[:, : (x.shape[1] >> 1) + (x.shape[1] & 1)] * ((x.shape[1] << 2) | 1),
    "invert": lambda x: x * ~x.shape[1],
    "next_power_of_two": lambda x: x * (1 << (x.shape[1] - 1).bit_length()),
    "round_and_ceil_of_size": lambda x: x * round(x.shape[1]) * math.ceil(x.shape[1]),
    "str_of_size": lambda x: x * len(str(x.shape[1] * 25)),
    "format_of_size": lambda x: x * len(f"{x.shape[1]:04d}{x.shape[1]}"),
    # repr and the text of a container holding sizes read the value as str does (they read `s0`)
    "repr_of_size": lambda x: x * len(repr(x.shape[1] * 25)),
    "repr_in_f_string_and_percent": lambda x: x * len(f"{x.shape[1]!r}") * len("%r" % (x.shape[-1] - 1,)),
    "text_of_listed_shape": lambda x: x * len(str(list(x.shape))) + len(str([x.shape[1], 2])),
    "text_of_tuple_of_shape": lambda x: x * len(str(tuple(x.shape))) + len(repr(x.shape[1:][0])),
    "tensor_of_shape": lambda x: x + torch.tensor(x.shape).sum(),
    "tensor_of_listed_shape": lambda x: x * torch.tensor(list(x.shape), dtype=torch.float32).prod(),
    "negative_floordiv_and_mod": lambda x: x * ((-x.shape[1]) // 3) + (-x.shape[1]) % 4 + x.shape[1] // -4,
    "divmod_of_size": lambda x: x * divmod(x.shape[1], 3)[1],
    "range_over_size": lambda x: sum(x[:, i] * i for i in range(x.shape[1])),
    # hashed as the int it equals: set membership and dict keys decide on the value
    "size_in_a_set": lambda x: x * (1 if x.shape[1] in {6, 7} else 2),
    "size_as_a_dict_key": lambda x: x * {6: 1, 10: 3}.get(x.shape[1], 2),
    # a size handed to a factory or an opaque torch call as a number
    "linspace_of_size_steps": lambda x: x * torch.linspace(0, 1, x.shape[1]),
    "opaque_fill_with_size": lambda x: x.clone().fill_(x.shape[1]),
    # a torch call with no tensor argument that squall does not model: torch's C code took the
    # size for its own torch.SymInt and failed on it (AttributeError: no attribute 'node')
    "tril_indices_of_size": lambda x: x[:, :2] * torch.tril_indices(x.shape[1], x.shape[1], offset=-1).sum(),
    "triu_indices_of_a_shape": lambda x: x * torch.triu_indices(*x.shape[::-1]).shape[1],
    # torch.add, sub, mul and div of two numbers give a 0-d tensor in eager (LED's attention:
    # `torch.div(seq_len, window_overlap, rounding_mode="trunc") - 1`); squall raised TypeError
    "torch_div_of_two_sizes": lambda x: x * (torch.div(x.shape[1], 2, rounding_mode="trunc") - 1) + torch.div(x.shape[1], 4),
    "torch_add_sub_mul_of_numbers": lambda x: x * torch.add(x.shape[1], 1) - torch.sub(x.shape[1], 2) * torch.mul(0.5, x.shape[0]),
    "torch_floor_divide_of_size_and_float": lambda x: x * torch.floor_divide(x.shape[1], 2.5) + torch.true_divide(x.shape[1], 3),
}

LENGTHS = (6, 7, 10, 13, 4)


@pytest.mark.parametrize("dynamic", [True, None], ids=["dynamic", "automatic_dynamic"])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_size_arithmetic_matches_eager_at_every_length(name, dynamic):
    fn = PROGRAMS[name]
    jfn = squall.jit(fn, dynamic=dynamic) if dynamic else squall.jit(fn)
    for n in LENGTHS:
        x = torch.randn(3, n)
        with warnings.catch_warnings():
            warnings.simplefilter("error", squall.SquallWarning)  # traced, not run eagerly
            warnings.filterwarnings("ignore", "squall: .* runs as an opaque torch call")
            got = jfn(x)
        torch.testing.assert_close(got, fn(x), msg=lambda m: f"{name} at length {n}: {m}")


def test_a_float_product_reads_the_size_and_guards_it():
    env = ShapeEnv()
    s0 = env.symbol(6, "x", 1)
    assert s0 * 0.5 == 3.0 and 0.5 * s0 == 3.0 and type(s0 * 0.5) is float
    assert "s0 == 6" in env.guards and "s0" in env.specialised


def test_shifts_by_a_constant_stay_symbolic():
    env = ShapeEnv()
    s0 = env.symbol(13, "x", 1)
    half, quadruple = s0 >> 1, s0 << 2
    assert source(half) == "(s0 // 2)" and half.value == 6
    assert source(quadruple) == "(4*s0)" and quadruple.value == 52
    assert not env.specialised


def test_a_multiple_of_a_sum_divides_exactly():
    """`numel // known` for a view's -1, where the sizes hold an opaque floor division (a strided
    conv's output): the quotient is exact, not an opaque term whose later read would guard it."""
    env = ShapeEnv()
    s0, s1 = env.symbol(3, "x", 0), env.symbol(9, "x", 2)
    n = (s1 - 1) // 2 + 1  # 5
    rows = s0 * n * n + s0 * n
    assert source((64 * rows) // (4 * rows)) == "16" and (64 * rows) % (4 * rows) == 0
    quotient = (s0 * 8 * rows) // (4 * rows)
    assert source(quotient) == "(2*s0)" and quotient.value == 6
    assert (rows // (rows + 1)).value == 0  # not a multiple: an opaque term, its value eager's
    assert not env.specialised


_CONV_WEIGHT = torch.randn(8, 3, 3, 3)


def _split_after_strided_conv(x, w=_CONV_WEIGHT):
    """LeViT's attention: a strided conv, its map flattened into tokens, `view(B, N, heads, -1)`
    and a split along the inferred dimension."""
    y = torch.nn.functional.conv2d(x, w, stride=2).flatten(2).transpose(1, 2)
    B, N, _ = y.shape
    q, k = y.view(B, N, 2, -1).split([1, 3], dim=3)
    return q * 2 + k.sum(-1, keepdim=True)


def test_a_split_on_an_inferred_dimension_keeps_the_batch_symbolic():
    jf = squall.jit(_split_after_strided_conv, dynamic=True)
    for batch in (2, 3, 5):
        x = torch.randn(batch, 3, 9, 9)
        torch.testing.assert_close(jf(x), _split_after_strided_conv(x))
    # before: the -1 was an opaque (a*b) // b, whose read by the split guarded the batch size too
    assert jitted_state(jf).cache_info().misses == 1


def _shift_right(ids):
    """T5's and BART's decoder inputs from labels: a slice assignment over symbolic sizes."""
    out = ids.new_zeros(ids.shape)
    out[..., 1:] = ids[..., :-1].clone()
    out[..., 0] = 5
    out[:, 1::3] += 1  # a stepped region, of a length that depends on the size's remainder
    return out.masked_fill(out == -100, 0)


def test_a_slice_assignment_keeps_its_sizes_symbolic():
    jf = squall.jit(_shift_right, dynamic=True, executors=["torch"])
    for shape in [(2, 8), (3, 5), (4, 9), (2, 2), (5, 12)]:
        x = torch.randint(-100, 50, shape)
        torch.testing.assert_close(jf(x), _shift_right(x))
    # before: the assigned region's sizes were read as ints (`len(range(...))`), which keyed
    # both dimensions by value, and every shape compiled
    assert jitted_state(jf).cache_info().misses == 1


def test_a_size_prints_as_its_expression_and_reads_as_its_digits():
    env = ShapeEnv()
    s0 = env.symbol(6, "x", 1)
    assert source(s0 + 1) == "(s0 + 1)" and not env.guards  # traces and messages
    assert str(s0 + 1) == "7" and f"{s0:03d}" == "006"  # the program's own str and format
    assert repr(s0 + 1) == "7" and f"{s0!r}" == "6" and "%r" % (s0,) == "6" and str([s0, 2]) == "[6, 2]"
    assert env.specialised == {"s0"}


def test_a_size_repeats_a_sequence_as_its_value_and_refuses_what_an_int_refuses():
    env = ShapeEnv()
    s0 = env.symbol(3, "x", 1)
    assert s0 * "ab" == "ababab" and [0] * s0 == [0, 0, 0]  # as eager's int (through __index__)
    with pytest.raises(TypeError):
        s0 + "ab"
    with pytest.raises(TypeError):
        s0 & 1.5


def test_torch_arithmetic_of_two_numbers_is_a_0d_tensor_as_eager_makes():
    # each result's dtype and device as eager's argument parser gives them, bools included
    def f(x):
        return [torch.add(5, 2), torch.div(5, 2), torch.mul(True, False), torch.add(3j, 2), torch.div(5, 2, rounding_mode="floor"), x + 1]

    got, expected = squall.jit(f)(torch.ones(1)), f(torch.ones(1))
    for g, e in zip(got, expected):
        assert (g.dtype, g.device, g.shape) == (e.dtype, e.device, e.shape)
        torch.testing.assert_close(g, e)
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool"):
        squall.jit(lambda x: torch.sub(True, False) + x)(torch.ones(1))
