"""OpInfos for attention and resizing ops: scaled_dot_product_attention, pixel_shuffle, interpolate."""
from __future__ import annotations

import torch

from opinfos import ALL_TYPES, FLOATING, ErrorInput, OpInfo, SampleInput, make_tensor

F = torch.nn.functional


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
    yield SampleInput((x(1, 3, 3, 3), 1))


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
            n = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}.get(mode)
            for d in ((n,) if n else (1, 2, 3)):
                s = (5, 4, 3)[:d]
                yield SampleInput((x(2, 3, *s),), {"size": (7, 3, 6)[:d], "mode": mode})
                yield SampleInput((x(1, 2, *s, noncontiguous=True),), {"scale_factor": 2, "mode": mode})
                # the input's own size: resizing is the identity
                yield SampleInput((x(2, 3, *s),), {"size": s, "mode": mode})
                yield SampleInput((x(2, 3, *s),), {"scale_factor": 1, "mode": mode})
            if n:
                s = (5, 4, 3)[:n]
                yield SampleInput((x(1, 2, *s),), {"size": (8, 2, 4)[:n], "mode": mode, "align_corners": True})
                yield SampleInput((x(1, 2, *s),), {"size": s, "mode": mode, "align_corners": True})
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
    yield ErrorInput(SampleInput((x(1, 2, 4),), {"size": 3, "mode": "bicubic"}), NotImplementedError, "4D input")


_NEAREST_TYPES = FLOATING  # torch has no integer nearest kernels for every rank

opinfos = [
    OpInfo("pixel_shuffle", F.pixel_shuffle, _shuffle_samples, ALL_TYPES, error_inputs=_shuffle_errors, symbol="torch.nn.functional.pixel_shuffle"),
    OpInfo("pixel_unshuffle", F.pixel_unshuffle, _unshuffle_samples, ALL_TYPES, error_inputs=_unshuffle_errors, symbol="torch.nn.functional.pixel_unshuffle"),
    OpInfo("interpolate_nearest", F.interpolate, _interp_samples(("nearest", "nearest-exact")), _NEAREST_TYPES, error_inputs=_interp_errors, symbol="torch.nn.functional.interpolate"),
    OpInfo("interpolate_linear", F.interpolate, _interp_samples(("linear", "bilinear", "trilinear")), FLOATING, symbol="torch.nn.functional.interpolate", tolerances={torch.bfloat16: (1.6e-2, 3e-2)}),
    # (taps past an edge read the edge; a negative source position is not clamped, as the linear modes' is)
    OpInfo("interpolate_bicubic", F.interpolate, _interp_samples(("bicubic",)), FLOATING, symbol="torch.nn.functional.interpolate", tolerances={torch.bfloat16: (1.6e-2, 3e-2)}),
    OpInfo("interpolate_area", F.interpolate, _interp_samples(("area",)), FLOATING, symbol="torch.nn.functional.interpolate"),
]


# torch has no bfloat16 cdist kernel on CPU
