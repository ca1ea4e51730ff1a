"""OpInfos for the ops of squall.ltorch.attention."""
from __future__ import annotations

import torch

from opinfos import FLOATING, ErrorInput, OpInfo, SampleInput, make_tensor


F = torch.nn.functional


_ATTN_TOL = {torch.bfloat16: (3e-2, 3e-2), torch.float32: (1e-4, 1e-5)}


def _sdpa_samples(dtype, device):
    x = lambda *shape, **kw: make_tensor(shape, dtype, device, low=-2, high=2, **kw)
    yield SampleInput((x(2, 3, 4, 5), x(2, 3, 6, 5), x(2, 3, 6, 7)))
    yield SampleInput((x(2, 3, 4, 5), x(2, 3, 6, 5), x(2, 3, 6, 7)), {"is_causal": True})
    yield SampleInput((x(2, 3, 6, 5), x(2, 3, 4, 5), x(2, 3, 4, 5)), {"is_causal": True, "scale": 0.3})
    bool_mask = make_tensor((4, 6), torch.bool, device)
    bool_mask[1] = False  # a fully masked row gives zeros
    yield SampleInput((x(2, 3, 4, 5), x(2, 3, 6, 5), x(2, 3, 6, 7)), {"attn_mask": bool_mask})
    yield SampleInput((x(2, 3, 4, 5), x(2, 3, 6, 5), x(2, 3, 6, 7)), {"attn_mask": x(3, 1, 6)})
    yield SampleInput((x(2, 3, 4, 5), x(2, 3, 6, 5), x(2, 3, 6, 7)), {"attn_mask": make_tensor((4, 6), torch.float32, device)})
    yield SampleInput((x(4, 5), x(6, 5), x(6, 7)))  # no batch or heads
    yield SampleInput((x(1, 3, 4, 5, noncontiguous=True), x(2, 3, 6, 5), x(2, 3, 6, 7)))  # broadcast batch
    yield SampleInput((x(2, 6, 4, 5), x(2, 3, 6, 5), x(2, 3, 6, 7)), {"enable_gqa": True})
    yield SampleInput((x(2, 3, 4, 5), x(2, 3, 0, 5), x(2, 3, 0, 7)))  # nothing to attend to: zeros
    yield SampleInput((x(2, 0, 4, 5), x(2, 0, 6, 5), x(2, 0, 6, 7)))


def _sdpa_errors(device):
    f = torch.float32
    x = lambda *shape, dtype=f: make_tensor(shape, dtype, device)
    q, k, v = x(2, 3, 4, 5), x(2, 3, 6, 5), x(2, 3, 6, 7)
    yield ErrorInput(SampleInput((q, k, v), {"attn_mask": x(4, 6, dtype=torch.bool), "is_causal": True}), RuntimeError, "attn_mask should not be set when is_causal=True")
    yield ErrorInput(SampleInput((q, x(2, 3, 6, 5, dtype=torch.float64), v)), RuntimeError, "to have the same dtype")
    yield ErrorInput(SampleInput((q, k, v), {"attn_mask": x(4, 6, dtype=torch.int64)}), RuntimeError, "Expected attn_mask dtype to be bool or float")
    yield ErrorInput(SampleInput((q, k, v), {"attn_mask": x(4, 5)}), RuntimeError, "must match the existing size")
    yield ErrorInput(SampleInput((x(5), x(5), x(5))), RuntimeError, "at least 2 dimensional")
    yield ErrorInput(SampleInput((x(2, 4, 4, 5), k, v), {"enable_gqa": True}), RuntimeError, "must divide the number of heads")
    yield ErrorInput(SampleInput((x(2, 4, 4, 5), k, v)), RuntimeError, "must match the size")
    yield ErrorInput(SampleInput((q, k, v), {"dropout_p": 1.5}), RuntimeError, "dropout probability has to be between 0 and 1")
    i = torch.int64
    yield ErrorInput(SampleInput((x(2, 3, dtype=i), x(2, 3, dtype=i), x(2, 3, dtype=i))), RuntimeError, "floating point")


def _sdpa_dropout_samples(dtype, device):
    x = lambda *shape: make_tensor(shape, dtype, device)
    yield SampleInput((x(2, 3, 4, 5), x(2, 3, 6, 5), x(2, 3, 6, 7)), {"dropout_p": 0.3})
    yield SampleInput((x(2, 3, 4, 5), x(2, 3, 6, 5), x(2, 3, 6, 7)), {"dropout_p": 0.5, "is_causal": True})


opinfos = [
    OpInfo("scaled_dot_product_attention", F.scaled_dot_product_attention, _sdpa_samples, FLOATING, error_inputs=_sdpa_errors, symbol="torch.nn.functional.scaled_dot_product_attention", tolerances=_ATTN_TOL),
    OpInfo("scaled_dot_product_attention_dropout", F.scaled_dot_product_attention, _sdpa_dropout_samples, FLOATING, symbol="torch.nn.functional.scaled_dot_product_attention", random=True),
]
