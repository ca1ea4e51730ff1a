"""A traced program's type checks (`isinstance`, `torch.is_tensor`) answer as in eager (squall.frontend.type_checks)."""
from __future__ import annotations

import builtins
import numbers
import queue
import warnings

import pytest
import torch
from torch.testing import assert_close

import squall
from squall.proxies import NumberProxy, TensorProxy


def _calls_match(fn, calls):
    """Call `fn` and its jitted form on each argument tuple; each result must equal eager's."""
    jf = squall.jit(fn)
    for args in calls:
        assert_close(jf(*args), fn(*args))
    return jf


def _number_inputs(jf) -> list[str]:
    return [p.name for p in squall.last_traces(jf).traced.inputs if type(p) is NumberProxy]


def test_isinstance_torch_tensor_takes_the_tensor_branch():
    def program(x):
        return x + 1 if isinstance(x, torch.Tensor) else x * 0

    _calls_match(program, [(torch.randn(4),)])


def test_torch_is_tensor_and_tuples_of_classes_answer_as_in_eager():
    def program(x, y):
        out = x * 2 if torch.is_tensor(x) else x * 0
        out = out + (1 if isinstance(x, (list, torch.Tensor)) else 100)
        out = out + (1 if isinstance(x, int | torch.Tensor) else 100)  # a union, as isinstance takes it
        return out + (1 if isinstance(x, (int, float)) else 0) + (y if isinstance(y, torch.Tensor) else 0)

    _calls_match(program, [(torch.randn(3), torch.randn(3)), (torch.randn(3), [1])])


def test_a_wrong_second_argument_is_the_same_type_error_as_in_eager():
    def program(x):
        return x if isinstance(x, 3) else x + 1

    with pytest.raises(TypeError) as eager:
        program(torch.randn(2))
    with pytest.raises(TypeError, match="isinstance") as traced:
        squall.jit(program)(torch.randn(2))
    assert str(traced.value) == str(eager.value)


def test_a_parameter_is_a_parameter_as_argument_and_as_module_attribute():
    def program(p, t):
        return p * (2 if isinstance(p, torch.nn.Parameter) else 3) + t * (2 if isinstance(t, torch.nn.Parameter) else 3)

    p = torch.nn.Parameter(torch.randn(3))
    with torch.no_grad():
        _calls_match(program, [(p, torch.randn(3))])

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.randn(3))
            self.register_buffer("scale", torch.full((3,), 2.0))

        def forward(self, x):
            w = self.weight * (1 if isinstance(self.weight, torch.nn.Parameter) else 10)
            return x * w * (self.scale if not isinstance(self.scale, torch.nn.Parameter) else 0)

    m = Scaled()
    with torch.no_grad():
        x = torch.randn(3)
        assert_close(squall.jit(m)(x), m(x))


def test_a_dynamic_float_is_a_float_and_a_dynamic_int_an_int():
    def program(x, s, n):
        out = x * s if isinstance(s, float) else x - 100
        out = out + (1 if isinstance(s, (int, float)) and isinstance(s, numbers.Number) else 100)
        out = out + (100 if isinstance(s, int) or isinstance(n, float) or isinstance(n, bool) else 1)
        return out + (n if isinstance(n, int) and isinstance(n, numbers.Integral) else -100)

    x = torch.randn(4)
    jf = _calls_match(program, [(x, 0.5 + i / 4, 2 + i) for i in range(6)])
    assert _number_inputs(jf) == ["s", "n"]  # both were run-time numbers when the checks ran


def test_a_bool_flag_is_an_int_and_a_bool_as_in_eager():
    def program(x, flag):
        return x + (1 if isinstance(flag, int) else 100) + (10 if isinstance(flag, bool) else 1000)

    _calls_match(program, [(torch.randn(2), True), (torch.randn(2), False)])


def test_torch_still_sees_a_proxy_as_what_it_is():
    # torch's C argument parser reads an object that claims to be a torch.Tensor as one (a
    # crash for a proxy): it must keep seeing proxies as they are, also in a Scalar overload
    seen = []

    def program(x):
        seen.append((builtins.type(x), isinstance(x, TensorProxy)))  # (the program's own `type(x)` is torch.Tensor)
        return torch.where(x > 0, x, 0.0) + torch.pow(x.abs(), 2.0)

    _calls_match(program, [(torch.randn(5),)])
    assert seen[0] == (TensorProxy, True)  # the traced call (then eager)


def test_the_builtin_isinstance_is_never_replaced_even_where_the_program_runs():
    original = builtins.isinstance
    seen = queue.SimpleQueue()  # (a list would be the program's side effect, replayed: not written while traced)

    def failing(x):
        seen.put((isinstance(x, torch.Tensor), builtins.isinstance is original))
        raise ValueError("the program's own error")

    with pytest.raises(ValueError, match="the program's own error"):
        squall.jit(failing)(torch.randn(2))  # traced, then run eagerly, which raises it
    assert [seen.get_nowait(), seen.get_nowait()] == [(True, True), (True, True)]
    assert builtins.isinstance is original


def test_code_reached_other_than_as_the_programs_own_copy_answers_as_in_eager():
    """super().forward, the __init__ of a class the program builds and a property getter run as
    they are (not as recording copies): their type checks answer as in eager too."""

    class Out:
        def __init__(self, a, s):
            self.kind = (isinstance(a, torch.Tensor), torch.is_tensor(a), isinstance(s, float))

    class Base(torch.nn.Module):
        def forward(self, x, s):
            return x * (1 if isinstance(x, torch.Tensor) else 100)

    class Child(Base):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(3))

        @property
        def scale(self):
            return 2 if isinstance(self.weight, torch.nn.Parameter) else 200

        def forward(self, x, s):
            out = Out(x, s)
            return super().forward(x, s) * self.scale + (1 if out.kind == (True, True, True) else 100) * self.weight * s

    m = Child()
    jitted = squall.jit(m)
    with torch.no_grad():
        for s in (0.5, 0.25, 0.125):  # a float that changes: a run-time number from the second call on
            x = torch.randn(3)
            assert_close(jitted(x, s), m(x, s))


def test_transformers_uses_a_4d_attention_mask_as_given():
    # masking_utils._preprocess_mask_arguments takes a 4D mask as it is only where
    # `isinstance(attention_mask, torch.Tensor)`: else it builds a causal mask of its own
    pytest.importorskip("transformers", reason="transformers is a test extra: pip install -e '.[test]'")
    from real_models import TRANSFORMERS_MODELS, import_torchvision

    import_torchvision()
    model = next(m for m in TRANSFORMERS_MODELS if m.name == "llama").build()
    ids = torch.randint(0, 97, (2, 8))
    mask = torch.zeros(2, 1, 8, 8)  # bidirectional: eager's output differs from a causal mask's
    mask[1, :, :, 6:] = torch.finfo(torch.float32).min
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", squall.SquallWarning)
        expected = model(input_ids=ids, attention_mask=mask).logits
        causal = model(input_ids=ids).logits
        actual = squall.jit(model)(input_ids=ids, attention_mask=mask).logits
    assert not torch.allclose(expected, causal)  # the mask matters
    assert_close(actual, expected)


class _Shapes:
    """A helper object a module holds, whose property and method check a tensor's exact class."""

    def __init__(self):
        self.last = None

    @property
    def plain(self):
        return 2 if type(self.last) is torch.Tensor else 300

    def scale(self, x):
        return x * (2 if type(x) is torch.Tensor else 300)


def _class_is_tensor(x):
    # (as library code that is not run as a recording copy checks it)
    return x.__class__ is torch.Tensor


def test_exact_class_checks_answer_as_in_eager_in_properties_and_through_class():
    """`type(x) is torch.Tensor` in a property getter of an object the program reaches, and
    `x.__class__ is torch.Tensor` / `is torch.nn.Parameter` in any code, answer as in eager
    (before: the proxy's own class, and the other branch was compiled silently)."""

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.shapes = _Shapes()
            self.weight = torch.nn.Parameter(torch.ones(3))

        def forward(self, x):
            self.shapes.last = x
            return (self.shapes.scale(x) * self.shapes.plain * (2 if _class_is_tensor(x) else 300)
                    + self.weight * (2 if self.weight.__class__ is torch.nn.Parameter else 300))

    m = Model()
    jitted = squall.jit(m)
    for _ in range(2):
        x = torch.randn(3)
        assert_close(jitted(x), m(x))
