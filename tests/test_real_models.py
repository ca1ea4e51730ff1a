"""Real models from timm and transformers (small configs, random weights, no downloads) against eager:
outputs with their types and fields, no opaque fallback, gradients for a few.

transformers models are called without an attention mask here (masks need value speculation)."""
from __future__ import annotations

import warnings

import pytest
import torch

import squall
from real_models import TIMM_MODELS, TRANSFORMERS_MODELS, RealModel, assert_same_output, import_torchvision

import_torchvision()
pytest.importorskip("timm", reason="timm is a test extra: pip install -e '.[test]'")
pytest.importorskip("transformers", reason="transformers is a test extra: pip install -e '.[test]'")


def _params(models):
    return [pytest.param(m, id=m.name) for m in models]


def _no_opaque_calls(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = fn(*args, **kwargs)
    opaque = sorted({str(w.message) for w in caught if issubclass(w.category, squall.SquallWarning)})
    assert not opaque, "\n".join(opaque)
    return out


@pytest.mark.parametrize("model", _params(TIMM_MODELS + TRANSFORMERS_MODELS))
def test_real_model_matches_eager(model: RealModel):
    torch.manual_seed(0)
    module, inputs = model.build(), model.inputs()
    with torch.no_grad():
        expected = module(**inputs)
        jitted = squall.jit(module)
        first = _no_opaque_calls(jitted, **inputs)
        second = jitted(**inputs)
    tolerances = dict(atol=model.tolerance, rtol=model.tolerance)
    assert_same_output(first, expected, **tolerances)
    assert_same_output(second, expected, **tolerances)
    if not isinstance(expected, torch.Tensor):
        assert first is not second, "every call returns a new output object, as eager does"


_WITH_GRADIENTS = [m for m in TIMM_MODELS + TRANSFORMERS_MODELS if m.name in ("timm/test_resnet", "timm/test_vit", "gpt2", "llama", "mixtral")]


@pytest.mark.parametrize("model", _params(_WITH_GRADIENTS))
def test_real_model_gradients_match_eager(model: RealModel):
    torch.manual_seed(0)
    module, inputs = model.build(), model.inputs()
    params = [p for p in module.parameters() if p.requires_grad]

    def loss(out):
        logits = out if isinstance(out, torch.Tensor) else out["logits"]
        return logits.square().mean()

    expected = torch.autograd.grad(loss(module(**inputs)), params, allow_unused=True)
    actual = torch.autograd.grad(loss(squall.jit(module)(**inputs)), params, allow_unused=True)
    for p, a, e in zip(params, actual, expected):
        if e is None:
            assert a is None or not a.any()
        else:
            torch.testing.assert_close(a, e, atol=1e-4, rtol=1e-3)
