"""Python numbers that keep changing become run-time values (NumberProxy), as eager computes them."""
from __future__ import annotations

import inspect
import math
import os
import warnings

import pytest
import torch
from torch.testing import assert_close

import squall
from squall.compiler.pipeline import compile_program
from squall.frontend.speculation import SPECULATION_LIMIT, dynamic_reads, guards_of
from squall.market.config import resolve_executors
from squall.proxies import NumberProxy


def _calls_match(fn, calls, **jit_options):
    """Call `fn` and its jitted form on each argument tuple; each result must equal eager's."""
    jf = squall.jit(fn, **jit_options)
    for args in calls:
        assert_close(jf(*args), fn(*args), equal_nan=True)
    return jf


def _number_inputs(jf) -> list[str]:
    return [p.name for p in squall.last_traces(jf).traced.inputs if type(p) is NumberProxy]


def test_a_float_that_changes_every_call_compiles_twice_and_matches_eager():
    x = torch.randn(5, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # no "compiled N times" warning
        jf = _calls_match(lambda x, s: x * s + 1, [(x, 0.1 * i) for i in range(12)])
    info = jf.cache_info()
    assert info.misses == 2  # the first value, then the number as a run-time input
    assert info.hits == 10
    assert _number_inputs(jf) == ["s"]
    assert "def computation(x, s):" in squall.last_traces(jf).source  # passed to the generated code


def test_keyword_numbers_become_dynamic_too():
    x = torch.randn(4)
    jf = squall.jit(lambda x, *, scale=1.0: x * scale)
    for i in range(6):
        assert_close(jf(x, scale=i / 3), x * (i / 3))
    assert jf.cache_info().misses == 2


def test_an_int_used_arithmetically_keeps_eagers_type_promotion():
    ints = torch.arange(6)
    floats = torch.randn(6)
    halves = torch.randn(6, dtype=torch.float16)

    def program(i, f, h, n):
        return i * (n + 1) - n // 2, f * n, h * (n / 3), i % (n + 2), -n * i

    jf = _calls_match(program, [(ints, floats, halves, n) for n in range(1, 7)])
    out = jf(ints, floats, halves, 9)
    assert [t.dtype for t in out] == [torch.int64, torch.float32, torch.float16, torch.int64, torch.int64]
    assert jf.cache_info().misses == 2


def test_a_float_scalar_promotes_an_int_tensor_as_a_python_float_does():
    ints = torch.arange(5)
    jf = _calls_match(lambda i, s: i * s + s, [(ints, 0.5 * k) for k in range(5)])
    assert jf(ints, 1.25).dtype == torch.get_default_dtype()


@pytest.mark.parametrize(
    "program",
    [
        lambda x, n: x.reshape(n, -1).sum(0),  # a shape
        lambda x, n: x[:n] * 2,  # a slice bound
        lambda x, n: torch.zeros(n) + x.sum(),  # a factory's size
        lambda x, n: torch.stack([x] * n).sum(0) * len(range(n)),  # range()
        lambda x, n: x.sum(dim=n % 2),  # a dim
        lambda x, n: x * {1: 5, 2: 7}.get(n, 1) + (n in {3, 6}),  # a dict's and a set's key (missed before 2026-11-27)
        lambda x, n: x * len(repr(n) + f"{n!r}") + (str([n]) == "[3]"),  # its repr (the proxy's before 2026-11-27)
    ],
    ids=["shape", "slice", "factory", "range", "dim", "key", "repr"],
)
def test_an_int_that_must_be_concrete_is_specialised_with_a_guard_and_matches(program):
    x = torch.randn(6, 4)
    values = [1, 2, 3, 6, 2, 3, 1, 2, 6]
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # never the eager fallback
        jf = _calls_match(program, [(x, n) for n in values])
    assert jf.cache_info().size <= len(set(values)) + 1
    # keyed by value again, or (a slice bound, a shape, a factory's size: tests/test_int_bounds.py)
    # a size symbol: no run-time number, no eager fallback
    assert set(_number_inputs(jf)) <= _size_inputs(jf)


def _size_inputs(jf) -> set[str]:
    """The int inputs the last trace reads as size symbols (`DynamicDims.number_size`)."""
    env = squall.last_traces(jf).traced.context.shapes
    return {name for _, name, dim in env.symbols.values() if dim is None}


def test_an_int_read_for_a_shape_becomes_a_size_symbol():
    x = torch.randn(6, 4)
    jf = _calls_match(lambda x, n: x.reshape(n, -1) * n, [(x, n) for n in (1, 2, 3, 1, 2, 3)])
    info = jf.cache_info()
    # 1 by value, 2 and 3 one entry (n a size symbol: tests/test_int_bounds.py); one entry per value before
    assert info.hits == 4 and info.size == 2 and info.guard_failures == 0
    assert _number_inputs(jf) == ["n"] and _size_inputs(jf) == {"n"}


@pytest.mark.parametrize("first", [1.0, 0.0, -0.0])
def test_negative_zero_nan_and_infinities_divide_as_in_eager(first):
    x = torch.tensor([1.0, -2.0, 0.0, 3.0])
    values = [first, 2.0, 0.0, -0.0, float("nan"), -0.0, float("inf"), -float("inf"), 0.0, -0.0]
    jf = _calls_match(lambda x, s: (x / s, s / 2), [(x, s) for s in values])
    assert jf.cache_info().misses == 2
    neg = jf(x, -0.0)[0]
    assert neg[0].item() == -math.inf and neg[1].item() == math.inf  # eager's signs, not +0.0's


def test_bools_stay_specialised():
    x = torch.randn(3)

    def program(x, flag, s):
        return x * s if flag else x - s

    jf = _calls_match(program, [(x, b, 2.0) for b in (True, False, True, False)])
    info = jf.cache_info()
    assert info.misses == 2 and info.size == 2  # one program per flag value, keyed by value
    assert not _number_inputs(jf)


def test_a_comparison_branch_is_guarded_on_the_comparison_not_the_value():
    x = torch.randn(4)

    def program(x, s):
        if s > 0:
            return x * s
        return x - s

    values = [1.0, 2.0, 3.0, -1.0, -2.0, 4.0, -3.0, 5.0, 0.0]
    jf = _calls_match(program, [(x, s) for s in values])
    info = jf.cache_info()
    assert info.misses == 3  # the first value; dynamic for s > 0; and for not s > 0
    guards = guards_of(squall.last_traces(jf))
    assert [g.args[0] for g in guards] == ["bool"]


def test_numbers_flow_into_ops_of_several_kinds():
    x = torch.randn(6, 4)

    def program(x, s, k):
        y = torch.add(x, s, alpha=k)  # alpha: a run-time number too
        y = torch.clamp(y, min=-s, max=s * 4)
        y = y**2 + torch.where(y > 0, y, s) + torch.pow(x.abs(), s / 4)
        t = y.sum(dim=k % 2)  # a dim: specialised
        return t * (s / 2 + 1), s * 3 > 1, abs(-s) // 1

    calls = [(x, 0.5 + i / 3, 1 + i % 3) for i in range(8)]
    jf = _calls_match(program, calls)
    traced = str(squall.last_traces(jf).traced)
    assert "prims.number_truediv" in traced and "ltorch.clamp" in traced
    # s stays a run-time number; k, whose `k % 2` is a dim, is keyed by value again
    assert _number_inputs(jf) == ["s"]
    out = jf(x, 9.0, 2)
    assert out[1] is True and type(out[2]) is float  # numbers come back as Python numbers


def test_a_number_computed_inside_an_op_and_read_there_guards_its_inputs():
    # torch.add reads `alpha != 1` for an int tensor's alpha: inside the op's own decomposition
    # a read guards the numbers it came from, at the program's level
    x = torch.arange(6)
    jf = _calls_match(lambda x, s: torch.add(x, x, alpha=s) * s, [(x, k) for k in (1, 2, 3, 2, 1)])
    assert jf.cache_info().misses <= 3


class _ScaledLoss(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))

    def forward(self, x, y, scale):
        return ((self.net(x) * scale - y) ** 2).mean() / scale


def test_a_training_step_with_a_dynamic_scale_gives_eagers_gradients():
    torch.manual_seed(0)
    model, reference = _ScaledLoss(), _ScaledLoss()
    reference.load_state_dict(model.state_dict())
    compiled = squall.jit(model)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    for step in range(6):
        lr, scale = 0.1 / (step + 1), 1.0 + step / 2  # both change at every step
        loss, expected = compiled(x, y, scale), reference(x, y, scale)
        assert_close(loss, expected)
        loss.backward()
        expected.backward()
        with torch.no_grad():
            for p, q in zip(model.parameters(), reference.parameters()):
                assert_close(p.grad, q.grad)
                p -= lr * p.grad
                q -= lr * q.grad
                p.grad = q.grad = None
    assert compiled._jitted.cache_info().misses == 2
    backward = squall.last_traces(compiled).backward
    assert any(type(p) is NumberProxy for p in backward.inputs)  # the backward reads `scale`


def test_a_module_call_with_a_changing_number():
    torch.manual_seed(0)

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x, temperature):
            return torch.softmax(self.lin(x) / temperature, dim=-1)

    m = Scaled()
    jm = squall.jit(m)
    x = torch.randn(2, 3)
    for t in (1.0, 0.5, 2.0, 0.7, 1.3):
        assert_close(jm(x, t), m(x, t))
    assert jm._jitted.cache_info().misses == 2


def _thrashing(x, t):
    a = (x.sin() * 2).cos().exp()
    v = t.item()  # a new value at every call
    return (a * v).tanh().sin() * 3 + 1


_READ_LINE = inspect.getsourcelines(_thrashing)[1] + 2


def test_an_item_read_that_thrashes_becomes_a_run_time_read():
    x = torch.randn(8, 8)
    jf = squall.jit(_thrashing)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # never the eager fallback
        for i in range(SPECULATION_LIMIT + 8):
            t = torch.tensor(float(i))
            assert_close(jf(x, t), _thrashing(x, t))
    misses = jf.cache_info().misses
    assert misses == SPECULATION_LIMIT + 2  # speculated variants, then one with the read at run time
    for i in range(5):  # compiles stopped
        t = torch.tensor(100.0 + i)
        assert_close(jf(x, t), _thrashing(x, t))
    assert jf.cache_info().misses == misses
    executed = squall.last_traces(jf).executed
    assert any(b.sym.id == "squall.read" for b in executed.bsyms)
    assert not guards_of(squall.last_traces(jf))


def test_a_run_time_read_that_then_needs_a_concrete_value_still_falls_back():
    def program(x, t):
        n = t.item()
        return x[: int(n)] * 2  # the number is then needed as a slice bound, new at every call

    x = torch.randn(40)
    jf = squall.jit(program)
    with pytest.warns(squall.SquallWarning, match="runs the original function eagerly"):
        for i in range(2 * SPECULATION_LIMIT + 6):
            t = torch.tensor(i + 1)
            assert_close(jf(x, t), program(x, t))


def _inductor():
    squall_inductor = pytest.importorskip("squall_inductor")
    ex = squall_inductor.InductorExecutor(autotune=False, choices_path=None)
    if not ex.is_available():
        pytest.skip(f"inductor is not available here: {ex.is_available()}")
    return ex


def test_fusion_regions_form_on_both_sides_of_a_run_time_read():
    inductor = _inductor()
    torch_ex = resolve_executors(["torch"])[0]
    x = torch.randn(64, 64)
    site = f"{os.path.basename(__file__)}:{_READ_LINE}"
    with dynamic_reads(frozenset({site})):
        c = compile_program(_thrashing, (x, torch.tensor(2.0)), {}, executors=[inductor, torch_ex])
    calls = [b for b in c.executed.bsyms if b.sym.id != "python.del"]
    kinds = [b.sym.id for b in calls]
    read = kinds.index("squall.read")
    assert "inductor.region" in kinds[:read] and "inductor.region" in kinds[read + 1 :]
    mul = next(b for b in calls[read + 1 :] if any(type(p) is NumberProxy for p in b.input_proxies()))
    assert mul.executor.name == "torch"  # inductor's checker leaves the run-time number to torch
    for v in (3.0, -1.5):
        t = torch.tensor(v)
        assert_close(c.fn(x, t), _thrashing(x, t))


def test_inductors_checker_refuses_a_run_time_number():
    inductor = _inductor()
    torch_ex = resolve_executors(["torch"])[0]
    x = torch.randn(32, 32)
    c = compile_program(lambda x, s: (x.sin() * s).cos() + s, (x, 2.0), {}, executors=[inductor, torch_ex],
                        dynamic=frozenset({("args", 1)}))
    for d in c.plan.decisions:
        if any(type(p) is NumberProxy for p in d.bsym.input_proxies()):
            assert d.executor == "torch"
    assert_close(c.fn(x, 0.25), (x.sin() * 0.25).cos() + 0.25)


@pytest.mark.parametrize(
    "program",
    [
        lambda x, n: torch.full((2, n), n) + x.sum(),  # sizes and fill values: constants of the op
        lambda x, n: x.view(n, -1) + x.new_ones(()) * n,
        lambda x, n: x.roll(n, 0) * f"{n}".__len__(),  # str(): a read like any other
        lambda x, n: x.unsqueeze(0).expand(n, 12).cumsum(n % 2),
        lambda x, n: torch.nan_to_num(x / 0, nan=n / 2, posinf=n * 1.0),  # an elementwise op wanting a float constant
    ],
    ids=["full", "view", "format", "expand", "nan_to_num"],
)
def test_a_number_reaching_an_op_that_cannot_take_it_is_specialised_never_an_error(program):
    x = torch.randn(12)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        _calls_match(program, [(x, n) for n in (1, 2, 3, 4, 2, 1)])


def test_a_wrong_number_raises_eagers_error():
    x = torch.randn(6)
    jf = squall.jit(lambda x, n: x.reshape(n, -1))
    jf(x, 2)
    jf(x, 3)  # n is now dynamic, then specialised for the shape
    with pytest.raises(RuntimeError, match="invalid for input of size 6|shape"):
        jf(x, 4)
    jf2 = squall.jit(lambda x, s: x[s])
    jf2(x, 1)
    jf2(x, 2)
    with pytest.raises((TypeError, IndexError)):
        jf2(x, 1.5)  # a float index, as eager refuses it
    with pytest.raises(ZeroDivisionError):
        squall_floordiv = squall.jit(lambda x, n: x * (10 // n))
        squall_floordiv(x, 1)
        squall_floordiv(x, 2)
        squall_floordiv(x, 0)  # computed at run time: Python's own error


def test_a_number_argument_named_like_a_generated_name_does_not_clash():
    x = torch.randn(3)
    jf = _calls_match(lambda x, n0: x * (n0 * 2 + 1) + n0, [(x, k) for k in (1.0, 2.0, 3.0)])
    assert jf.cache_info().misses == 2


def test_strict_mode_keeps_dynamic_numbers_and_guards_their_reads():
    x = torch.randn(4)

    def program(x, s):
        return x * s if s > 0 else x - s

    jf = _calls_match(program, [(x, s) for s in (1.0, 2.0, -1.0, 3.0)], strict=True)
    assert jf.cache_info().misses == 3


def test_numbers_inside_lists_tuples_and_dicts_become_dynamic_too():
    x = torch.randn(4)

    def program(x, cfg, pair, *, opts):
        return x * cfg["lr"] + pair[1] * opts[0]["m"] - pair[0]

    jf = squall.jit(program)
    for i in range(6):
        args, kwargs = (x, {"lr": 0.1 * i, "name": "a"}, (2, 0.5 + i)), {"opts": [{"m": i}]}
        assert_close(jf(*args, **kwargs), program(*args, **kwargs))
    assert jf.cache_info().misses == 2
    assert _number_inputs(jf) == ["cfg_lr", "pair_1", "opts_0_m"]  # pair[0] never changed: a constant
    with pytest.raises(TypeError):  # a str where the number was: eager's error, from a new compile
        jf(x, {"lr": "fast", "name": "a"}, (2, 0.5), opts=[{"m": 1}])


_FILL_MASK = torch.tensor([True, False, True, False, True, True])
_T1, _T2 = torch.randn(6), torch.randn(6) + 2


@pytest.mark.parametrize(
    "program",
    [
        lambda x, s: torch.nn.functional.leaky_relu(x, s),
        lambda x, s: torch.nn.functional.elu(x, alpha=s),
        lambda x, s: x.masked_fill(_FILL_MASK, s),
        lambda x, s: torch.addcmul(x, _T1, _T2, value=s),
        lambda x, s: torch.addcdiv(x, _T1, _T2, value=s),
        lambda x, s: torch.full_like(x, s) * x,
        lambda x, s: torch.full((2, 6), s) + x,
    ],
    ids=["leaky_relu", "elu", "masked_fill", "addcmul", "addcdiv", "full_like", "full"],
)
def test_fill_values_and_coefficients_are_run_time_numbers(program):
    x = torch.randn(6, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        jf = _calls_match(program, [(x, s) for s in (0.5, -0.25, 1.0, 3.5, -0.0)])
    assert jf.cache_info().misses == 2  # not keyed by value once dynamic: 0.5, then run-time floats
    assert _number_inputs(jf) == ["s"]
    # an int is keyed apart from a float (its own run-time entry: eager's dtype for an int fill)
    for n in (2, 7, 9):
        assert_close(jf(x, n), program(x, n))
    assert jf.cache_info().misses == 3


def test_a_float_fill_into_an_int_tensor_is_read_as_eager_truncates():
    ints = torch.arange(6)
    program = lambda x, s: x.masked_fill(_FILL_MASK, s) + torch.full_like(x, s)
    _calls_match(program, [(ints, s) for s in (1.5, 2.7, -3.2, 2.7)])  # the value read, guarded: eager's truncation


def test_a_run_time_coefficient_gives_eagers_gradients():
    def step(x, slope, alpha):
        return (torch.nn.functional.leaky_relu(x, slope) + torch.nn.functional.elu(x, alpha=alpha)).sum()

    jf = squall.jit(step)
    for slope, alpha in ((0.1, 1.0), (0.2, 0.5), (0.3, 2.0)):
        x = torch.randn(8, requires_grad=True)
        xe = x.detach().clone().requires_grad_()
        out, expected = jf(x, slope, alpha), step(xe, slope, alpha)
        out.backward()
        expected.backward()
        assert_close(out, expected)
        assert_close(x.grad, xe.grad)
    assert jf.cache_info().misses == 2
