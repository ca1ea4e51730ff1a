"""OpInfos for shape ops: views, reshapes, permutations, expansion, joins, splits, flips, padding."""
from __future__ import annotations

import torch

from opinfos import ALL_TYPES, ErrorInput, OpInfo, SampleInput, make_tensor


def _t(shape, dtype=torch.float32, device="cpu", **kw):
    return make_tensor(shape, dtype, device, **kw)


def _samples(*forms):
    """A sample generator from (shape, args, kwargs[, noncontiguous]) forms; the tensor comes first."""

    def samples(dtype, device):
        for form in forms:
            shape, args, kwargs = form[:3]
            nc = len(form) > 3 and form[3]
            yield SampleInput((_t(shape, dtype, device, noncontiguous=nc), *args), dict(kwargs))

    return samples


def _errors(*forms):
    """Error inputs from (shape, args, kwargs, exception, regex) forms, all rejected by torch too."""

    def errors(device):
        for shape, args, kwargs, exc, match in forms:
            yield ErrorInput(SampleInput((_t(shape, device=device), *args), dict(kwargs)), exc, match)

    return errors


def _seq_samples(*groups, dim_kw=None):
    """Samples whose first argument is a list of tensors of the given shapes."""

    def samples(dtype, device):
        for shapes, kwargs in groups:
            yield SampleInput(([_t(s, dtype, device) for s in shapes],), dict(kwargs))

    return samples


def _seq_errors(*forms):
    def errors(device):
        for shapes, kwargs, exc, match in forms:
            yield ErrorInput(SampleInput(([_t(s, device=device) for s in shapes],), dict(kwargs)), exc, match)

    return errors


def _mixed_cat(dtype, device):
    yield SampleInput(([_t((2, 3), dtype, device), _t((1, 3), torch.float64, device)],))
    yield SampleInput(([_t((0,), torch.int64, device), _t((2, 3), dtype, device)], 1))


opinfos = [
    OpInfo("view", lambda x, *s, **k: x.view(*s, **k), _samples(((2, 3, 4), (6, 4), {}), ((2, 3, 4), ((-1,),), {}), ((), (1, 1), {}), ((0, 3), (3, -1), {}), ((4,), (), {"size": (2, 2)})), ALL_TYPES,
           error_inputs=_errors(((2, 3), (-1, -1), {}, RuntimeError, "only one dimension can be inferred"), ((2, 3), (-2, 3), {}, RuntimeError, "invalid shape dimension -2"),
                                ((0, 3), (-1, 0), {}, RuntimeError, "ambiguous"), ((2, 3), (4, -1), {}, RuntimeError, r"shape '\[4, -1\]' is invalid for input of size 6")), symbol="torch.Tensor.view"),
    OpInfo("reshape", torch.reshape, _samples(((2, 3, 4), ((4, -1),), {}, True), ((5,), ((),), {}) if False else ((1,), ((),), {}), ((2, 0), ((0, 5),), {}), ((3, 4), (), {"shape": (-1,)})), ALL_TYPES,
           error_inputs=_errors(((2, 3), ((5,),), {}, RuntimeError, "invalid for input of size 6")), symbol="torch.Tensor.reshape"),
    OpInfo("reshape_method", lambda x, *s: x.reshape(*s), _samples(((2, 3, 4), (4, 3, 2), {}, True), ((6,), ((2, 3),), {})), ALL_TYPES, symbol="torch.Tensor.reshape"),
    OpInfo("view_as", lambda x, y: x.view_as(y), lambda dt, dev: [SampleInput((_t((2, 6), dt, dev), _t((3, 4), dt, dev))), SampleInput((_t((), dt, dev), _t((1, 1), dt, dev)))], ALL_TYPES, symbol="torch.Tensor.view_as"),
    OpInfo("reshape_as", lambda x, y: x.reshape_as(y), lambda dt, dev: [SampleInput((_t((2, 6), dt, dev, noncontiguous=True), _t((4, 3), torch.float32, dev)))], ALL_TYPES, symbol="torch.Tensor.reshape_as"),
    OpInfo("flatten", torch.flatten, _samples(((2, 3, 4), (), {}), ((2, 3, 4), (1,), {}, True), ((2, 3, 4, 5), (), {"start_dim": -3, "end_dim": -2}), ((), (), {}), ((2, 0, 3), (0, 1), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3, 4), (2, 1), {}, RuntimeError, "start_dim cannot come after end_dim"), ((2, 3), (3,), {}, IndexError, "Dimension out of range")), symbol="torch.Tensor.flatten"),
    OpInfo("unflatten", torch.unflatten, _samples(((2, 12), (1, (3, 4)), {}), ((2, 12), (-1, (2, -1, 3)), {}), ((6,), (0, (6,)), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3), (1, (2, 2)), {}, RuntimeError, "don't multiply up to the size of dim 1"), ((2, 3), (1, ()), {}, RuntimeError, "sizes must be non-empty")), symbol="torch.Tensor.unflatten"),
    OpInfo("squeeze", torch.squeeze, _samples(((1, 3, 1, 2), (), {}), ((1, 3, 1), (-1,), {}), ((1, 3, 1), (1,), {}), ((1, 3, 1, 1), ((0, 2),), {}), ((), (0,), {}), ((1, 0), (), {"dim": 0})), ALL_TYPES,
           error_inputs=_errors(((3,), (1,), {}, IndexError, "Dimension out of range")), symbol="torch.Tensor.squeeze"),
    OpInfo("unsqueeze", torch.unsqueeze, _samples(((2, 3), (0,), {}), ((2, 3), (-1,), {}), ((2, 3), (1,), {}, True), ((), (0,), {}), ((0,), (1,), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3), (3,), {}, IndexError, "Dimension out of range")), symbol="torch.Tensor.unsqueeze"),
    OpInfo("permute", torch.permute, _samples(((2, 3, 4), ((2, 0, 1),), {}), ((2, 3, 4), ((-1, 0, 1),), {}, True), ((), ((),), {}), ((2, 0), (), {"dims": (1, 0)})), ALL_TYPES,
           error_inputs=_errors(((2, 3, 4), ((0, 1),), {}, RuntimeError, "does not match the length"), ((2, 3), ((0, 0),), {}, RuntimeError, "duplicate dims"), ((2, 3), ((0, 2),), {}, IndexError, "Dimension out of range")),
           symbol="torch.Tensor.permute"),
    OpInfo("permute_varargs", lambda x, *d: x.permute(*d), _samples(((2, 3, 4), (1, 2, 0), {})), ALL_TYPES, symbol="torch.Tensor.permute"),
    OpInfo("transpose", torch.transpose, _samples(((2, 3, 4), (0, 2), {}), ((2, 3), (-1, -2), {}, True), ((), (0, -1), {}), ((3,), (0, 0), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3), (0, 2), {}, IndexError, "Dimension out of range")), symbol="torch.transpose"),
    OpInfo("swapaxes", torch.swapaxes, _samples(((2, 3, 4), (0, -1), {}), ((2, 3), (), {"axis0": 1, "axis1": 0})), ALL_TYPES, symbol="torch.swapaxes"),
    OpInfo("swapdims", lambda x, a, b: x.swapdims(a, b), _samples(((2, 3, 4), (1, 2), {})), ALL_TYPES, symbol="torch.swapdims"),
    OpInfo("t", torch.t, _samples(((2, 3), (), {}), ((3,), (), {}), ((), (), {}), ((4, 3), (), {}, True)), ALL_TYPES,
           error_inputs=_errors(((2, 3, 4), (), {}, RuntimeError, "expects a tensor with <= 2 dimensions")), symbol="torch.t"),
    OpInfo("T", lambda x: x.T, _samples(((2, 3), (), {}), ((3,), (), {}), ((), (), {})), ALL_TYPES, symbol="torch.Tensor.T"),
    OpInfo("mT", lambda x: x.mT, _samples(((2, 3), (), {}), ((4, 2, 3), (), {}, True)), ALL_TYPES,
           error_inputs=_errors(((3,), (), {}, RuntimeError, "only supported on matrices or batches")), symbol="torch.Tensor.mT"),
    OpInfo("mH", lambda x: x.mH, _samples(((2, 3), (), {}), ((4, 2, 3), (), {})), ALL_TYPES, symbol="torch.Tensor.mH"),
    OpInfo("H", lambda x: x.H, _samples(((2, 3), (), {}), ((), (), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3, 4), (), {}, RuntimeError, "only supported on matrices")), symbol="torch.Tensor.H"),
    OpInfo("movedim", torch.movedim, _samples(((2, 3, 4), (0, 2), {}), ((2, 3, 4, 5), ((0, 1), (-1, 0)), {}), ((2, 3, 4), (), {"source": -1, "destination": 0}), ((), (0, 0), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3, 4), ((0, 1), (0,)), {}, RuntimeError, "should contain the same number of dims"), ((2, 3, 4), ((0, 0), (1, 2)), {}, RuntimeError, "repeated dim in `source`")),
           symbol="torch.movedim"),
    OpInfo("moveaxis", lambda x, s, d: x.moveaxis(s, d), _samples(((2, 3, 4), (1, 0), {})), ALL_TYPES, symbol="torch.movedim"),
    OpInfo("diagonal", torch.diagonal, _samples(((3, 4), (), {}), ((3, 4), (1,), {}), ((4, 3), (-2,), {}), ((2, 3, 4), (0, 2, 0), {}), ((3, 4), (), {"offset": 5}), ((5, 5), (), {"dim1": -1, "dim2": 0}, True)), ALL_TYPES,
           error_inputs=_errors(((2, 3, 4), (0, 1, 1), {}, RuntimeError, "diagonal dimensions cannot be identical")), symbol="torch.diagonal"),
    OpInfo("expand", lambda x, *s, **k: x.expand(*s, **k), _samples(((3, 1), (3, 4), {}), ((3, 1), (2, -1, 4), {}), ((), (2, 2), {}), ((1,), ((0,),), {}), ((3, 1), (), {"size": (3, 2)})), ALL_TYPES,
           error_inputs=_errors(((2, 3), (3,), {}, RuntimeError, "the number of sizes provided"), ((2, 3), (-1, 2, 3), {}, RuntimeError, "isn't allowed in a leading, non-existing dimension 0"),
                                ((2, 3), (3, 3), {}, RuntimeError, "must match the existing size")), symbol="torch.Tensor.expand"),
    OpInfo("expand_as", lambda x, y: x.expand_as(y), lambda dt, dev: [SampleInput((_t((3, 1), dt, dev), _t((2, 3, 4), torch.float32, dev)))], ALL_TYPES, symbol="torch.Tensor.expand_as"),
    OpInfo("broadcast_to", torch.broadcast_to, _samples(((3, 1), ((2, 3, 5),), {}), ((), ((2,),), {}), ((1, 4), ((0, 4),), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3), ((4, 3),), {}, RuntimeError, "must match the existing size")), symbol="torch.broadcast_to"),
    OpInfo("broadcast_tensors", torch.broadcast_tensors, lambda dt, dev: [SampleInput((_t((3, 1), dt, dev), _t((4,), dt, dev), _t((), dt, dev))), SampleInput((_t((2, 3), dt, dev),))], ALL_TYPES,
           error_inputs=lambda dev: [ErrorInput(SampleInput((_t((2, 3)), _t((4,)))), RuntimeError, "must match the size")], symbol="torch.broadcast_tensors"),
    OpInfo("repeat", lambda x, *r, **k: x.repeat(*r, **k), _samples(((2, 3), (2, 1), {}), ((2, 3), (1, 2, 3), {}), ((), (3,), {}), ((2,), ((0, 2),), {}), ((2, 3), (), {"repeats": (1, 2)}, True)), ALL_TYPES,
           error_inputs=_errors(((2, 3), (2,), {}, RuntimeError, "can not be smaller than number of dimensions"), ((2, 3), (-1, 1), {}, RuntimeError, "negative dimension")), symbol="torch.Tensor.repeat"),
    OpInfo("repeat_interleave", torch.repeat_interleave, _samples(((2, 3), (2,), {}), ((2, 3), (3,), {"dim": 1}), ((2, 3), (2, -2), {}), ((), (3,), {}), ((2, 3), (0, 0), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3), (-1,), {}, RuntimeError, "must be non-negative")), symbol="torch.repeat_interleave"),
    OpInfo("contiguous", lambda x: x.contiguous(), _samples(((2, 3), (), {}, True), ((), (), {})), ALL_TYPES, symbol="torch.Tensor.contiguous"),
    OpInfo("detach", torch.detach, _samples(((2, 3), (), {})), ALL_TYPES, symbol="torch.Tensor.detach"),
    OpInfo("clone", torch.clone, _samples(((2, 3), (), {}, True), ((), (), {}), ((0, 2), (), {})), ALL_TYPES, symbol="torch.clone"),
    # clone must give a value of its own: an in-place op on it leaves the input alone
    OpInfo("clone_then_inplace", lambda x: (x.clone().mul_(2), x), _samples(((2, 3), (), {})), (torch.float32, torch.int64), symbol="torch.clone"),
    # --- joins ---
    OpInfo("cat", torch.cat, _seq_samples(([(2, 3), (4, 3)], {}), ([(2, 3), (2, 1)], {"dim": -1}), ([(0, 3), (2, 3)], {}), ([(2, 3)], {}), ([(0,), (2, 3), (0,)], {"dim": 1})), ALL_TYPES,
           error_inputs=_seq_errors(([(2, 3), (2, 4)], {}, RuntimeError, "Sizes of tensors must match except in dimension 0"), ([(2, 3), ()], {}, RuntimeError, "zero-dimensional tensor"),
                                    ([(2, 3), (3,)], {}, RuntimeError, "same number of dimensions"), ([], {}, ValueError, "expected a non-empty list"), ([(2, 3)], {"dim": 2}, IndexError, "Dimension out of range")),
           symbol="torch.cat"),
    OpInfo("cat_promotes", torch.cat, _mixed_cat, ALL_TYPES, symbol="torch.cat"),
    OpInfo("concatenate", torch.concatenate, _seq_samples(([(2, 3), (2, 3)], {"axis": 1})), ALL_TYPES, symbol="torch.concatenate"),
    OpInfo("stack", torch.stack, _seq_samples(([(2, 3), (2, 3)], {}), ([(2, 3), (2, 3), (2, 3)], {"dim": -1}), ([(), ()], {}), ([(0, 2)], {"dim": 1})), ALL_TYPES,
           error_inputs=_seq_errors(([(2, 3), (3, 3)], {}, RuntimeError, "stack expects each tensor to be equal size"), ([(2, 3)], {"dim": 4}, IndexError, "Dimension out of range")), symbol="torch.stack"),
    OpInfo("hstack", torch.hstack, _seq_samples(([(2,), (3,)], {}), ([(2, 3), (2, 1)], {}), ([(), ()], {})), ALL_TYPES, symbol="torch.hstack"),
    OpInfo("vstack", torch.vstack, _seq_samples(([(3,), (3,)], {}), ([(2, 3), (1, 3)], {}), ([(), ()], {})), ALL_TYPES, symbol="torch.vstack"),
    OpInfo("dstack", torch.dstack, _seq_samples(([(3,), (3,)], {}), ([(2, 3), (2, 3)], {}), ([(2, 3, 1), (2, 3, 2)], {})), ALL_TYPES, symbol="torch.dstack"),
    # --- splits ---
    OpInfo("split", torch.split, _samples(((5, 3), (2,), {}), ((5, 3), ([1, 4],), {}), ((2, 6), (3, -1), {}), ((0, 3), (2,), {}), ((4, 3), (), {"split_size_or_sections": [1, 0, 3], "dim": 0}, True)), ALL_TYPES,
           error_inputs=_errors(((2, 3), (0,), {}, RuntimeError, "split_size can only be 0"), ((2, 3), ([1, 2],), {}, RuntimeError, "expects split_sizes to sum exactly to 2")), symbol="torch.split"),
    OpInfo("split_method", lambda x, *a, **k: x.split(*a, **k), _samples(((5, 3), (2,), {}), ((5, 3), (), {"split_size": [2, 1], "dim": 1})), ALL_TYPES, symbol="torch.Tensor.split"),
    OpInfo("chunk", torch.chunk, _samples(((5, 3), (3,), {}), ((6, 3), (4,), {}), ((2, 7), (3, -1), {}), ((0,), (3,), {}), ((2, 3), (5,), {"dim": 1})), ALL_TYPES,
           error_inputs=_errors(((2, 3), (0,), {}, RuntimeError, "greater than 0"), ((), (1,), {}, RuntimeError, "at least a 1-dimensional tensor")), symbol="torch.chunk"),
    OpInfo("unbind", torch.unbind, _samples(((3, 2), (), {}), ((3, 2), (-1,), {}), ((0, 2), (1,), {})), ALL_TYPES,
           error_inputs=_errors(((), (), {}, IndexError, "tensor has no dimensions"), ((2, 3), (2,), {}, IndexError, "Dimension out of range")), symbol="torch.unbind"),
    OpInfo("tensor_split", torch.tensor_split, _samples(((7, 2), (3,), {}), ((7, 2), ([1, 5],), {}), ((2, 7), ([-2, 9, 3],), {"dim": 1}), ((3,), (5,), {}), ((6, 2), (), {"sections": 2}), ((6, 2), (), {"indices": (2,)})), ALL_TYPES,
           error_inputs=_errors(((2, 3), (0,), {}, RuntimeError, "number of sections must be larger than 0")), symbol="torch.tensor_split"),
    OpInfo("narrow", torch.narrow, _samples(((5, 3), (0, 1, 3), {}), ((5, 3), (-1, -2, 2), {}), ((5, 3), (0, 5, 0), {}), ((4, 6), (1, 2, 3), {}, True)), ALL_TYPES,
           error_inputs=_errors(((2, 3), (0, 3, 1), {}, IndexError, "start out of range"), ((2, 3), (0, 1, 3), {}, RuntimeError, r"start \(1\) \+ length \(3\) exceeds"),
                                ((), (0, 0, 1), {}, RuntimeError, "cannot be applied to a 0-dim tensor"), ((2, 3), (0, 0, -1), {}, RuntimeError, "length must be non-negative")), symbol="torch.narrow"),
    OpInfo("unfold", lambda x, *a, **k: x.unfold(*a, **k), _samples(((7,), (0, 3, 2), {}), ((2, 6, 3), (1, 2, 2), {}), ((2, 6), (-1, 6, 1), {}), ((), (0, 1, 1), {}), ((3, 4), (), {"dimension": 0, "size": 0, "step": 1})), ALL_TYPES,
           error_inputs=_errors(((3,), (0, 4, 1), {}, RuntimeError, "maximum size for tensor at dimension 0 is 3 but size is 4"), ((3,), (0, 2, 0), {}, RuntimeError, "step is 0 but must be > 0")), symbol="torch.Tensor.unfold"),
    # --- flips, rolls, rotations ---
    OpInfo("flip", torch.flip, _samples(((2, 3, 4), ((0, 2),), {}), ((2, 3), ((-1,),), {}, True), ((), ((),), {}), ((2, 0), ((0, 1),), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3), ((0, 0),), {}, RuntimeError, "dim 0 appears multiple times"), ((2, 3), ((2,),), {}, IndexError, "Dimension out of range")), symbol="torch.Tensor.flip"),
    OpInfo("flip_varargs", lambda x, *d: x.flip(*d), _samples(((2, 3, 4), (0, 1), {})), ALL_TYPES, symbol="torch.Tensor.flip"),
    OpInfo("fliplr", torch.fliplr, _samples(((2, 3), (), {}), ((2, 3, 4), (), {})), ALL_TYPES, error_inputs=_errors(((3,), (), {}, RuntimeError, "Input must be >= 2-d")), symbol="torch.fliplr"),
    OpInfo("flipud", torch.flipud, _samples(((2, 3), (), {}), ((4,), (), {})), ALL_TYPES, error_inputs=_errors(((), (), {}, RuntimeError, "Input must be >= 1-d")), symbol="torch.flipud"),
    OpInfo("roll", torch.roll, _samples(((4, 3), (1,), {}), ((4, 3), (-5, 0), {}), ((4, 3), ((1, 2), (0, 1)), {}), ((4, 3), (3, -1), {}, True), ((0, 3), (1, 0), {}), ((), (2,), {})), ALL_TYPES,
           error_inputs=_errors(((4, 3), ((1, 2), 0), {}, RuntimeError, "shifts and dimensions must align")), symbol="torch.roll"),
    OpInfo("rot90", torch.rot90, _samples(((3, 4), (), {}), ((3, 4), (2,), {}), ((2, 3, 4), (-1, (1, 2)), {}), ((3, 4), (4,), {}), ((3, 4), (), {"k": 3, "dims": (1, 0)})), ALL_TYPES,
           error_inputs=_errors(((3, 4), (1, (0,)), {}, RuntimeError, "expected total rotation dims == 2"), ((3, 4), (1, (0, 0)), {}, RuntimeError, "expected rotation dims to be different"),
                                ((3,), (), {}, RuntimeError, "expected total dims >= 2")), symbol="torch.rot90"),
    # --- padding ---
    OpInfo("pad", torch.nn.functional.pad, _samples(((2, 3), ((1, 2),), {}), ((2, 3), ((1, 1, 0, 2),), {"value": 1}), ((2, 3, 4), ((-1, 2, 1, -1),), {}), ((0, 3), ((1, 1, 1, 1),), {}), ((2, 3), ((),), {}), ((3, 4), ((2, 0),), {"mode": "constant", "value": 0}, True)), ALL_TYPES,
           error_inputs=_errors(((2, 3), ((1,),), {}, RuntimeError, "divisible by 2"), ((2, 3), ((1, 1) * 3,), {}, RuntimeError, "less than or equal to two times the input dimension")), symbol="torch.nn.functional.pad"),
    OpInfo("pad_modes", torch.nn.functional.pad, _samples(((2, 3, 5), ((2, 1),), {"mode": "reflect"}), ((2, 3, 5), ((2, 1, 1, 0),), {"mode": "replicate"}), ((2, 3, 5), ((3, 1),), {"mode": "circular"}), ((2, 4), ((0, 3),), {"mode": "reflect"})),
           (torch.float32, torch.float64), error_inputs=_errors(((2, 3), ((3, 3),), {"mode": "reflect"}, RuntimeError, "Padding size should be less than the corresponding input dimension"),
                                                    ((5,), ((1, 1),), {"mode": "replicate"}, NotImplementedError, "Padding size 2 is not supported for 1D input tensor")), symbol="torch.nn.functional.pad"),
    # --- triangles ---
    OpInfo("tril", torch.tril, _samples(((4, 4), (), {}), ((3, 5), (1,), {}), ((2, 3, 4), (), {"diagonal": -1}), ((0, 3), (), {}), ((4, 3), (-5,), {}, True)), ALL_TYPES,
           error_inputs=_errors(((3,), (), {}, RuntimeError, "must have at least 2 dimensions")), symbol="torch.tril"),
    OpInfo("triu", torch.triu, _samples(((4, 4), (), {}), ((3, 5), (2,), {}), ((2, 3, 4), (), {"diagonal": -1})), ALL_TYPES,
           error_inputs=_errors(((3,), (), {}, RuntimeError, "must have at least 2 dimensions")), symbol="torch.triu"),
]
