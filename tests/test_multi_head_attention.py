"""nn.MultiheadAttention (and the modules built on it: nn.TransformerEncoderLayer, torchvision's ViT)
traced through torch.nn.functional.multi_head_attention_forward, call by call (squall.ltorch.inlined):
it ran as one opaque call, and under gradients the whole program fell back to PyTorch's autograd."""
from __future__ import annotations

import warnings

import pytest
import torch

import squall

CASES = {
    "self-attention": (dict(), lambda q: (q, q, q), dict()),
    "batch second": (dict(batch_first=False), lambda q: (q, q, q), dict()),
    "no weights": (dict(), lambda q: (q, q, q), dict(need_weights=False)),
    "weights per head": (dict(), lambda q: (q, q, q), dict(average_attn_weights=False)),
    "key padding mask": (dict(), lambda q: (q, q, q), dict(key_padding_mask=torch.tensor([[False] * 8, [False] * 5 + [True] * 3]))),
    "causal mask": (dict(), lambda q: (q, q, q), dict(attn_mask=torch.triu(torch.ones(8, 8, dtype=torch.bool), 1))),
    "causal, no weights": (dict(), lambda q: (q, q, q), dict(attn_mask=torch.triu(torch.full((8, 8), float("-inf")), 1), need_weights=False)),
    "other key and value sizes": (dict(kdim=12, vdim=20), lambda q: (q, torch.randn(2, 6, 12), torch.randn(2, 6, 20)), dict()),
    "bias on key and value, zero attention": (dict(add_bias_kv=True, add_zero_attn=True), lambda q: (q, q, q), dict()),
}


def _mha(options):
    torch.manual_seed(0)
    return torch.nn.MultiheadAttention(32, 4, batch_first=options.pop("batch_first", True), **options)


def _no_squall_warnings(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    assert not [str(w.message) for w in caught if issubclass(w.category, squall.SquallWarning)]
    return out


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_multi_head_attention_traced_and_differentiated_as_eager(case):
    options, qkv, call = case
    module = _mha(dict(options))
    query = torch.randn(2, 8, 32) if options.get("batch_first", True) else torch.randn(8, 2, 32)
    inputs = qkv(query)
    params = list(module.parameters())
    expected = module(*inputs, **call)
    actual = _no_squall_warnings(squall.jit(module), *inputs, **call)
    for a, e in zip(actual, expected):
        if e is None:
            assert a is None
        else:
            torch.testing.assert_close(a, e)
    loss = lambda out: out[0].square().sum() + (out[1].sum() if out[1] is not None else 0)
    torch.testing.assert_close(torch.autograd.grad(loss(actual), params), torch.autograd.grad(loss(expected), params))


def test_transformer_encoder_layer_trains_with_squalls_gradients():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    x = torch.randn(2, 8, 32)
    params = list(layer.parameters())
    expected = torch.autograd.grad(layer(x).square().sum(), params)
    jitted = squall.jit(layer)
    actual = torch.autograd.grad(_no_squall_warnings(jitted, x).square().sum(), params)
    torch.testing.assert_close(actual, expected)
    assert "scaled_dot_product_attention" in str(squall.last_traces(jitted)[0]) or "softmax" in str(squall.last_traces(jitted)[0])


def test_torch_is_floating_point_and_is_complex_answer_from_the_dtype():
    """torch.is_floating_point(mask), as torch.nn.functional's mask handling asks it: the traced
    tensor's dtype answers (it raised NotModelled, a Python bool read from a tensor)."""
    def f(x, mask):
        if torch.is_floating_point(mask) and not torch.is_complex(x):
            return x + mask
        return x.masked_fill(mask, 0.0)

    x = torch.randn(3, 4)
    for mask in (torch.randn(3, 4), torch.rand(3, 4) > 0.5):
        torch.testing.assert_close(_no_squall_warnings(squall.jit(f), x, mask), f(x, mask))


def test_a_rebinding_in_torch_nn_functional_reaches_the_traced_attention(monkeypatch):
    # the traced copy of multi_head_attention_forward reads the module's globals at each call, as
    # the original does: a copy taken at import kept the old softmax (whose body then handed the
    # new one to squall as an opaque call: squall.ltorch.base's `_rebound`)
    softmax = torch.nn.functional.softmax
    monkeypatch.setattr(torch.nn.functional, "softmax", lambda x, dim, **kw: softmax(2 * x, dim, **kw))
    module = _mha(dict())
    query = torch.randn(2, 8, 32)
    expected = module(query, query, query)
    actual = _no_squall_warnings(squall.jit(module), query, query, query)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)
