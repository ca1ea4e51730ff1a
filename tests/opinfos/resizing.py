"""OpInfos for attention and resizing ops: scaled_dot_product_attention, pixel_shuffle, interpolate."""
from __future__ import annotations

import torch

from opinfos import ALL_TYPES, FLOATING, ErrorInput, OpInfo, SampleInput, make_tensor

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


def _shuffle_samples(dtype, device):
    x = lambda *shape, **kw: make_tensor(shape, dtype, device, **kw)
    yield SampleInput((x(2, 8, 3, 5), 2))
    yield SampleInput((x(9, 2, 2), 3))
    yield SampleInput((x(2, 2, 4, 3, 4, noncontiguous=True), 2))
    yield SampleInput((x(0, 4, 3, 3), 2))
    yield SampleInput((x(1, 3, 3, 3), 1))


def _unshuffle_samples(dtype, device):
    x = lambda *shape, **kw: make_tensor(shape, dtype, device, **kw)
    yield SampleInput((x(2, 2, 6, 4), 2))
    yield SampleInput((x(1, 6, 9), 3))
    yield SampleInput((x(2, 2, 3, 4, 6, noncontiguous=True), 2))
    yield SampleInput((x(0, 1, 4, 4), 2))


def _shuffle_errors(device):
    x = lambda *shape: make_tensor(shape, torch.float32, device)
    yield ErrorInput(SampleInput((x(4, 4), 2)), RuntimeError, "at least 3 dimensions")
    yield ErrorInput(SampleInput((x(1, 5, 2, 2), 2)), RuntimeError, "divisible by the square of upscale_factor")
    yield ErrorInput(SampleInput((x(1, 4, 2, 2), 0)), RuntimeError, "positive upscale_factor")


def _unshuffle_errors(device):
    x = lambda *shape: make_tensor(shape, torch.float32, device)
    yield ErrorInput(SampleInput((x(1, 4, 5, 4), 2)), RuntimeError, "height to be divisible by downscale_factor")
    yield ErrorInput(SampleInput((x(1, 4, 4, 5), 2)), RuntimeError, "width to be divisible by downscale_factor")


def _interp_samples(modes):
    def samples(dtype, device):
        x = lambda *shape, **kw: make_tensor(shape, dtype, device, **kw)
        for mode in modes:
            n = {"linear": 1, "bilinear": 2, "trilinear": 3}.get(mode)
            for d in ((n,) if n else (1, 2, 3)):
                s = (5, 4, 3)[:d]
                yield SampleInput((x(2, 3, *s),), {"size": (7, 3, 6)[:d], "mode": mode})
                yield SampleInput((x(1, 2, *s, noncontiguous=True),), {"scale_factor": 2, "mode": mode})
            if n:
                s = (5, 4, 3)[:n]
                yield SampleInput((x(1, 2, *s),), {"size": (8, 2, 4)[:n], "mode": mode, "align_corners": True})
                yield SampleInput((x(1, 2, *s),), {"scale_factor": 1.7, "mode": mode, "recompute_scale_factor": True})
                yield SampleInput((x(1, 2, *s),), {"scale_factor": (0.6, 1.5, 2.3)[:n], "mode": mode})
            else:
                yield SampleInput((x(1, 2, 7, 5),), {"scale_factor": (0.6, 1.5), "mode": mode})
                yield SampleInput((x(1, 2, 7, 5),), {"size": 3, "mode": mode})

    return samples


def _interp_errors(device):
    x = lambda *shape: make_tensor(shape, torch.float32, device)
    yield ErrorInput(SampleInput((x(1, 2, 4, 4),), {"size": 3, "scale_factor": 2}), ValueError, "only one of size or scale_factor")
    yield ErrorInput(SampleInput((x(1, 2, 4, 4),)), ValueError, "either size or scale_factor")
    yield ErrorInput(SampleInput((x(1, 2, 4, 4),), {"size": 3, "align_corners": True}), ValueError, "align_corners option can only be set")
    yield ErrorInput(SampleInput((x(1, 2, 4, 4),), {"size": (3, 3, 3)}), ValueError, "same number of spatial dimensions")
    yield ErrorInput(SampleInput((x(1, 2, 4, 4),), {"size": 3, "mode": "linear"}), NotImplementedError, "3D input")


_NEAREST_TYPES = FLOATING  # torch has no integer nearest kernels for every rank

opinfos = [
    OpInfo("scaled_dot_product_attention", F.scaled_dot_product_attention, _sdpa_samples, FLOATING, error_inputs=_sdpa_errors, symbol="torch.nn.functional.scaled_dot_product_attention", tolerances=_ATTN_TOL),
    OpInfo("scaled_dot_product_attention_dropout", F.scaled_dot_product_attention, _sdpa_dropout_samples, FLOATING, symbol="torch.nn.functional.scaled_dot_product_attention", random=True),
    OpInfo("pixel_shuffle", F.pixel_shuffle, _shuffle_samples, ALL_TYPES, error_inputs=_shuffle_errors, symbol="torch.nn.functional.pixel_shuffle"),
    OpInfo("pixel_unshuffle", F.pixel_unshuffle, _unshuffle_samples, ALL_TYPES, error_inputs=_unshuffle_errors, symbol="torch.nn.functional.pixel_unshuffle"),
    OpInfo("interpolate_nearest", F.interpolate, _interp_samples(("nearest", "nearest-exact")), _NEAREST_TYPES, error_inputs=_interp_errors, symbol="torch.nn.functional.interpolate"),
    OpInfo("interpolate_linear", F.interpolate, _interp_samples(("linear", "bilinear", "trilinear")), FLOATING, symbol="torch.nn.functional.interpolate", tolerances={torch.bfloat16: (1.6e-2, 3e-2)}),
    OpInfo("interpolate_area", F.interpolate, _interp_samples(("area",)), FLOATING, symbol="torch.nn.functional.interpolate"),
]


def _cdist_samples(dtype, device):
    x = lambda *shape, **kw: make_tensor(shape, dtype, device, **kw)
    for p in (2.0, 1.0, 0.0, 3.0, float("inf")):
        yield SampleInput((x(3, 4), x(5, 4)), {"p": p})
    yield SampleInput((x(2, 1, 3, 4), x(5, 5, 4, noncontiguous=True)))  # batch dims broadcast
    yield SampleInput((x(30, 4), x(6, 4)))  # more than 25 rows: the matmul form
    yield SampleInput((x(2, 3, 4), x(2, 5, 4)), {"compute_mode": "use_mm_for_euclid_dist"})
    yield SampleInput((x(0, 4), x(5, 4)))
    yield SampleInput((x(3, 0), x(5, 0)), {"p": 1.5})


def _cdist_errors(device):
    f = torch.float32
    x = lambda *shape, dtype=f: make_tensor(shape, dtype, device)
    yield ErrorInput(SampleInput((x(4), x(5, 4))), RuntimeError, "at least 2D tensors, X1 got: 1D")
    yield ErrorInput(SampleInput((x(3, 4), x(5, 3))), RuntimeError, "same number of columns. X1: 4 X2: 3")
    yield ErrorInput(SampleInput((x(3, 4), x(5, 4)), {"p": -1}), RuntimeError, "non-negative p values")
    yield ErrorInput(SampleInput((x(3, 4), x(5, 4)), {"compute_mode": "foo"}), ValueError, "not a valid value for compute_mode")
    yield ErrorInput(SampleInput((x(3, 4, dtype=torch.int64), x(5, 4, dtype=torch.int64))), RuntimeError, "floating-point dtypes")
    yield ErrorInput(SampleInput((x(3, 4), x(5, 4, dtype=torch.float64))), RuntimeError, "dtype")


# torch has no bfloat16 cdist kernel on CPU
opinfos.append(OpInfo("cdist", torch.cdist, _cdist_samples, (torch.float32, torch.float64), error_inputs=_cdist_errors, symbol="torch.cdist", tolerances={torch.float32: (1e-4, 1e-4)}))
