"""Programs valid in PyTorch that squall's traces do not model run eagerly, saying why
(squall.ltorch.unmodelled.NotModelled), and answer as eager: an `out=` tensor, a generator, an
embedding's max_norm renormalising its weight in place, a view reinterpreting memory, a nuclear
norm, a negative pad, histc's out=. Each was a NotImplementedError that stopped the program."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.testing import assert_close

import squall
from eager_answers import runs_eagerly_saying


def test_an_out_tensor_runs_eagerly():
    a, b = torch.randn(2, 3), torch.randn(3, 4)
    runs_eagerly_saying(lambda a, b, c: (torch.mm(a, b, out=c), c * 2)[1], lambda: (a, b, torch.empty(2, 4)), r"torch.mm\(..., out=...\) writes its result into a tensor given")


_OUT_PROGRAMS = [
    ("vector_norm", lambda x, out: torch.linalg.vector_norm(x, out=out) + 1, ()),  # raised squall's TypeError
    ("norm", lambda x, out: torch.norm(x, 2, 0, out=out) + 1, (4,)),
    ("matmul", lambda x, out: torch.matmul(x, x.T, out=out) * 2, (3, 3)),
    ("zeros", lambda x, out: torch.zeros(3, 4, out=out) + x, (3, 4)),
    ("sin", lambda x, out: torch.sin(x, out=out) * 2, (3, 4)),
]


@pytest.mark.parametrize(("fn", "out_shape"), [pytest.param(fn, shape, id=name) for name, fn, shape in _OUT_PROGRAMS])
def test_every_out_tensor_runs_eagerly_saying_so(fn, out_shape):
    x = torch.randn(3, 4)
    runs_eagerly_saying(fn, lambda: (x.clone(), torch.empty(out_shape)), r"\(\.\.\., out=\.\.\.\) writes its result into a tensor given")


def test_out_none_compiles():
    def fn(a, b):
        return torch.mm(a, b, out=None) + torch.linalg.vector_norm(a, out=None)

    a, b = torch.randn(2, 3), torch.randn(3, 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        assert_close(squall.jit(fn)(a, b), fn(a, b))


def test_a_generator_draws_as_eager_draws():
    def fn(x, generator):
        return torch.randint(0, 5, (3,), generator=generator) + torch.rand(3, generator=generator) + x

    eager_generator, squall_generator = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    jitted = squall.jit(fn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):  # the same generator at every call, drawing on
            assert_close(jitted(torch.ones(3), squall_generator), fn(torch.ones(3), eager_generator))
    said = [str(w.message) for w in caught if issubclass(w.category, squall.SquallWarning)]
    assert len(said) == 1 and "randint(generator=...)" in said[0] and "runs eagerly" in said[0], said


def test_embedding_max_norm_renormalises_the_weight_as_eager_does():
    def make():
        torch.manual_seed(0)
        return torch.tensor([[1, 2], [2, 5]]), torch.randn(10, 4) * 3

    runs_eagerly_saying(lambda i, w: F.embedding(i, w, max_norm=1.0) * 2, make, r"embedding\(max_norm=...\)")


def test_a_module_with_a_max_norm_embedding_splits_and_answers_as_eager():
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Embedding(10, 4, max_norm=1.0), torch.nn.Linear(4, 3))
    compiled = torch.nn.Sequential(torch.nn.Embedding(10, 4, max_norm=1.0), torch.nn.Linear(4, 3))
    compiled.load_state_dict(eager.state_dict())
    jitted = squall.jit(compiled)
    i = torch.tensor([[1, 2], [3, 9]])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            assert_close(jitted(i), eager(i))
    assert_close(compiled[0].weight, eager[0].weight)  # renormalised in place, as eager's
    assert any("max_norm" in str(w.message) and "runs eagerly" in str(w.message) for w in caught)


def test_a_view_reinterpreting_memory_runs_eagerly():
    x = torch.randn(3, 4)
    runs_eagerly_saying(lambda x: x.view(torch.int32) + 1, lambda: (x.clone(),), r"view\(dtype\) reinterprets memory")


def test_a_nuclear_norm_runs_eagerly():
    x = torch.randn(4, 5)
    runs_eagerly_saying(lambda x: torch.norm(x, p="nuc") * 2, lambda: (x.clone(),), "singular value decomposition")


def test_a_negative_reflect_pad_runs_eagerly():
    x = torch.randn(1, 2, 8)
    runs_eagerly_saying(lambda x: F.pad(x, (-1, 2), mode="reflect"), lambda: (x.clone(),), "negative padding")


def test_histc_out_runs_eagerly():
    x = torch.randn(50)
    runs_eagerly_saying(lambda x, out: torch.histc(x, bins=5, out=out) * 1, lambda: (x.clone(), torch.empty(5)), r"torch.histc\(..., out=...\) writes its result")


def test_a_torch_call_below_its_python_api_reaching_a_traced_tensor_runs_eagerly():
    """torch.func.vmap unwraps its batched tensors in C++ (aten.expand below torch's Python API):
    squall's own RuntimeError escaped to the caller, where eager runs; now the call runs eagerly."""

    def row_sums(x):
        return torch.vmap(lambda row: row.cos().sum())(x)

    x = torch.randn(4, 3)
    runs_eagerly_saying(row_sums, lambda: (x.clone(),), r"below torch's Python API")


@pytest.mark.parametrize("dynamic", [True, None], ids=["dynamic", "automatic_dynamic"])
def test_a_symbolic_size_handed_to_torch_below_its_python_api_runs_eagerly(dynamic):
    """torch.vmap hands its batch size to C++, which reads the size's SymNode: under symbolic sizes
    (dynamic=True, or a batch that changed) the call raised torch's internal assert
    (`!dynamicLayerStack.empty()`) where eager runs; now it runs eagerly, saying why."""

    def row_sums(x):
        return torch.vmap(lambda row: row.cos().sum())(x)

    jitted = squall.jit(row_sums, dynamic=dynamic)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in (4, 5, 6, 5):
            x = torch.randn(n, 3)
            assert_close(jitted(x), row_sums(x))
    said = [str(w.message) for w in caught if issubclass(w.category, squall.SquallWarning)]
    assert any("symbolic size s0 reached torch below its Python API" in m for m in said), said


def test_a_refusal_raised_under_another_error_runs_the_call_eagerly():
    """Library code that catches any error and raises its own over it (torch.testing.assert_close
    does): squall's refusal underneath (here an address read off a traced tensor) escaped to the
    caller as that error, where eager returns; now the call runs eagerly, saying why."""

    def wrapped_address(x):
        try:
            address = x.data_ptr()
        except Exception as error:
            raise RuntimeError("could not read the address") from error
        return x * 2 + (address > 0)

    x = torch.randn(4)
    runs_eagerly_saying(wrapped_address, lambda: (x.clone(),), r"data_ptr answers with a Python int read from its tensors")


def test_device_kind_queries_answer_from_the_traced_tensors_device():
    """x.is_mps (torch.testing asks it of every tensor it compares) and the other device kinds'
    and layouts' queries answer as eager does, without running the call eagerly."""
    names = ["is_cpu", "is_cuda", "is_meta", "is_mps", "is_xpu", "is_xla", "is_mtia", "is_maia", "is_ipu", "is_vulkan",
             "is_sparse", "is_sparse_csr", "is_mkldnn", "is_quantized", "is_nested"]

    def queries(x):
        return x + 1, [getattr(x, name) for name in names]

    x = torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)  # answered in the trace, not eagerly
        got = squall.jit(queries)(x)
    assert got[1] == queries(x)[1]


def test_a_torch_call_with_no_meta_kernel_runs_the_call_eagerly():
    """x.is_set_to(y) has no meta kernel, so squall cannot learn its output: before, the call
    raised squall's RuntimeError where eager answers; now it runs eagerly, saying why."""
    x = torch.randn(3)
    runs_eagerly_saying(lambda x: (x + 1, x.is_set_to(x)), lambda: (x.clone(),), r"torch.Tensor.is_set_to is not in squall's torch language, and running it on the meta device")


def test_numpy_of_a_traced_tensor_runs_the_call_eagerly():
    """x.numpy() raised squall's RuntimeError where eager answers (np.asarray(x) ran eagerly): both
    run the call eagerly, and a write through the array reaches the tensor, as in eager."""

    def doubled_through_numpy(x):
        return torch.from_numpy(x.numpy() * 2) + x

    def written_through_numpy(x):
        np.asarray(x)[0] = 5.0
        return x * 1

    x = torch.randn(3)
    runs_eagerly_saying(doubled_through_numpy, lambda: (x.clone(),), r"x.numpy\(\) is an array sharing the tensor's memory")
    runs_eagerly_saying(written_through_numpy, lambda: (x.clone(),), r"torch.Tensor.__array__ is not in squall's torch language")


def test_a_leaf_the_program_creates_with_requires_grad_runs_the_call_eagerly():
    """torch.zeros(3, requires_grad=True) inside the program came back not requiring grad, and a
    backward gave it no gradient, silently; now the call runs eagerly, so it is eager's leaf."""

    def with_a_new_leaf(x):
        w = torch.zeros(3, requires_grad=True)
        return x * 2 + w, w

    x = torch.randn(3, requires_grad=True)
    with pytest.warns(squall.SquallWarning, match=r"zeros\(requires_grad=True\) makes a leaf tensor autograd tracks"):
        out, leaf = squall.jit(with_a_new_leaf)(x)
    assert leaf.requires_grad and leaf.is_leaf
    out.sum().backward()
    assert_close(leaf.grad, torch.ones(3))


@pytest.mark.parametrize("product", ["matmul", "tensordot"])
def test_a_complex_matrix_product_runs_the_call_eagerly(product):
    """Before, squall's meta function raised TypeError where eager multiplies complex matrices."""
    a, b = torch.randn(2, 3, dtype=torch.cfloat), torch.randn(3, 2, dtype=torch.cfloat)
    fn = (lambda a, b: a @ b) if product == "matmul" else (lambda a, b: torch.tensordot(a, b, 1))
    runs_eagerly_saying(fn, lambda: (a.clone(), b.clone()), r"of complex tensors is not in squall's torch language")


def test_a_complex_number_written_into_a_complex_tensor():
    """v[0] = 1j raised TypeError ("can't assign a complex") where eager writes it."""

    def written(v):
        v[0] = 1j
        v[1:] = 2 + 3j
        return v * 2

    v = torch.zeros(3, dtype=torch.cdouble)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        got = squall.jit(written)(v.clone())
    assert_close(got, written(v.clone()))


def test_a_traced_tensors_text_runs_the_call_eagerly():
    """`str(x)`, `f"{x}"` and a list's text in the program gave the proxy's own text
    (`<TensorProxy x: ...>`), silently; the text is of the call's values, so the call runs eagerly."""
    known = {"tensor([1., 1.])": 2.0, "v=tensor([1., 1.])": 3.0, "[tensor([1., 1.])]": 4.0}
    for text in (str, lambda x: f"v={x}", lambda x: repr([x])):
        runs_eagerly_saying(lambda x: x * known.get(text(x), 0.0), lambda: (torch.ones(2),), r"turns tensor x into text")


def test_a_0d_tensor_formats_its_number_as_eager():
    """`f"{loss:.1f}"` raised TypeError (the proxy's format refused a spec) where eager formats the
    number: read and guarded, so a new value takes another variant; a spec on a tensor of more
    dimensions raises eager's TypeError."""
    scaled = lambda x: x * {"2.0": 1.0, "0.0": 2.0}.get(f"{x.sum():.1f}", 3.0)  # noqa: E731
    jitted = squall.jit(scaled)
    with warnings.catch_warnings():
        warnings.simplefilter("error", squall.SquallWarning)
        for x in (torch.ones(2), torch.zeros(2), torch.full((2,), 3.0), torch.ones(2)):
            assert_close(jitted(x), scaled(x))
    with pytest.raises(TypeError, match="unsupported format string passed to Tensor.__format__"):
        squall.jit(lambda x: f"{x:.1f}")(torch.ones(2))
