"""OpInfos for shape ops: views, reshapes, permutations, expansion, joins, splits, flips, padding."""
from __future__ import annotations

import torch

from opinfos import ALL_TYPES, ErrorInput, OpInfo, SampleInput
from opinfos import forms_errors as _errors, forms_samples as _samples, tensor as _t




opinfos = [
    OpInfo("view", lambda x, *s, **k: x.view(*s, **k), _samples(((2, 3, 4), (6, 4), {}), ((2, 3, 4), ((-1,),), {}), ((), (1, 1), {}), ((0, 3), (3, -1), {}), ((4,), (), {"size": (2, 2)}), ((2, 3, 4), (2, 3, 4), {}), ((2, 3), (-1, 3), {}, True)), ALL_TYPES,
           error_inputs=_errors(((2, 3), (-1, -1), {}, RuntimeError, "only one dimension can be inferred"), ((2, 3), (-2, 3), {}, RuntimeError, "invalid shape dimension -2"),
                                ((0, 3), (-1, 0), {}, RuntimeError, "ambiguous"), ((2, 3), (4, -1), {}, RuntimeError, r"shape '\[4, -1\]' is invalid for input of size 6")), symbol="torch.Tensor.view"),
    OpInfo("reshape", torch.reshape, _samples(((2, 3, 4), ((4, -1),), {}, True), ((5,), ((),), {}) if False else ((1,), ((),), {}), ((2, 0), ((0, 5),), {}), ((3, 4), (), {"shape": (-1,)}), ((2, 3, 4), ((2, 3, 4),), {}), ((2, 3), ((2, -1),), {}, True)), ALL_TYPES,
           error_inputs=_errors(((2, 3), ((5,),), {}, RuntimeError, "invalid for input of size 6")), symbol="torch.Tensor.reshape"),
    OpInfo("reshape_method", lambda x, *s: x.reshape(*s), _samples(((2, 3, 4), (4, 3, 2), {}, True), ((6,), ((2, 3),), {})), ALL_TYPES, symbol="torch.Tensor.reshape"),
    OpInfo("view_as", lambda x, y: x.view_as(y), lambda dt, dev: [SampleInput((_t((2, 6), dt, dev), _t((3, 4), dt, dev))), SampleInput((_t((), dt, dev), _t((1, 1), dt, dev))), SampleInput((_t((2, 3), dt, dev), _t((2, 3), torch.float32, dev)))], ALL_TYPES, symbol="torch.Tensor.view_as"),
    OpInfo("reshape_as", lambda x, y: x.reshape_as(y), lambda dt, dev: [SampleInput((_t((2, 6), dt, dev, noncontiguous=True), _t((4, 3), torch.float32, dev))), SampleInput((_t((2, 6), dt, dev), _t((2, 6), torch.float32, dev)))], ALL_TYPES, symbol="torch.Tensor.reshape_as"),
    OpInfo("flatten", torch.flatten, _samples(((2, 3, 4), (), {}), ((2, 3, 4), (1,), {}, True), ((2, 3, 4, 5), (), {"start_dim": -3, "end_dim": -2}), ((), (), {}), ((2, 0, 3), (0, 1), {}), ((5,), (), {}), ((2, 3, 4), (1, 1), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3, 4), (2, 1), {}, RuntimeError, "start_dim cannot come after end_dim"), ((2, 3), (3,), {}, IndexError, "Dimension out of range")), symbol="torch.Tensor.flatten"),
    OpInfo("unflatten", torch.unflatten, _samples(((2, 12), (1, (3, 4)), {}), ((2, 12), (-1, (2, -1, 3)), {}), ((6,), (0, (6,)), {}), ((2, 12), (1, (12,)), {}), ((2, 12), (-1, (-1,)), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3), (1, (2, 2)), {}, RuntimeError, "don't multiply up to the size of dim 1"), ((2, 3), (1, ()), {}, RuntimeError, "sizes must be non-empty")), symbol="torch.Tensor.unflatten"),
    OpInfo("squeeze", torch.squeeze, _samples(((1, 3, 1, 2), (), {}), ((1, 3, 1), (-1,), {}), ((1, 3, 1), (1,), {}), ((1, 3, 1, 1), ((0, 2),), {}), ((), (0,), {}), ((1, 0), (), {"dim": 0}), ((2, 3), (), {}), ((2, 3), (1,), {}), ((2, 3), ((0, 1),), {})), ALL_TYPES,
           error_inputs=_errors(((3,), (1,), {}, IndexError, "Dimension out of range")), symbol="torch.Tensor.squeeze"),
    OpInfo("unsqueeze", torch.unsqueeze, _samples(((2, 3), (0,), {}), ((2, 3), (-1,), {}), ((2, 3), (1,), {}, True), ((), (0,), {}), ((0,), (1,), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3), (3,), {}, IndexError, "Dimension out of range")), symbol="torch.Tensor.unsqueeze"),
    OpInfo("permute", torch.permute, _samples(((2, 3, 4), ((2, 0, 1),), {}), ((2, 3, 4), ((-1, 0, 1),), {}, True), ((), ((),), {}), ((2, 0), (), {"dims": (1, 0)}), ((2, 3, 4), ((0, 1, 2),), {}), ((2, 3, 4), ((0, -2, -1),), {}, True)), ALL_TYPES,
           error_inputs=_errors(((2, 3, 4), ((0, 1),), {}, RuntimeError, "does not match the length"), ((2, 3), ((0, 0),), {}, RuntimeError, "duplicate dims"), ((2, 3), ((0, 2),), {}, IndexError, "Dimension out of range")),
           symbol="torch.Tensor.permute"),
    OpInfo("permute_varargs", lambda x, *d: x.permute(*d), _samples(((2, 3, 4), (1, 2, 0), {})), ALL_TYPES, symbol="torch.Tensor.permute"),
    OpInfo("transpose", torch.transpose, _samples(((2, 3, 4), (0, 2), {}), ((2, 3), (-1, -2), {}, True), ((), (0, -1), {}), ((3,), (0, 0), {}), ((2, 3, 4), (1, 1), {}), ((2, 3, 4), (-1, 2), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3), (0, 2), {}, IndexError, "Dimension out of range")), symbol="torch.transpose"),
    OpInfo("swapaxes", torch.swapaxes, _samples(((2, 3, 4), (0, -1), {}), ((2, 3), (), {"axis0": 1, "axis1": 0}), ((2, 3, 4), (2, 2), {})), ALL_TYPES, symbol="torch.swapaxes"),
    OpInfo("swapdims", lambda x, a, b: x.swapdims(a, b), _samples(((2, 3, 4), (1, 2), {})), ALL_TYPES, symbol="torch.swapdims"),
    OpInfo("t", torch.t, _samples(((2, 3), (), {}), ((3,), (), {}), ((), (), {}), ((4, 3), (), {}, True)), ALL_TYPES,
           error_inputs=_errors(((2, 3, 4), (), {}, RuntimeError, "expects a tensor with <= 2 dimensions")), symbol="torch.t"),
    OpInfo("T", lambda x: x.T, _samples(((2, 3), (), {}), ((3,), (), {}), ((), (), {})), ALL_TYPES, symbol="torch.Tensor.T"),
    OpInfo("mT", lambda x: x.mT, _samples(((2, 3), (), {}), ((4, 2, 3), (), {}, True)), ALL_TYPES,
           error_inputs=_errors(((3,), (), {}, RuntimeError, "only supported on matrices or batches")), symbol="torch.Tensor.mT"),
    OpInfo("mH", lambda x: x.mH, _samples(((2, 3), (), {}), ((4, 2, 3), (), {})), ALL_TYPES, symbol="torch.Tensor.mH"),
    OpInfo("H", lambda x: x.H, _samples(((2, 3), (), {}), ((), (), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3, 4), (), {}, RuntimeError, "only supported on matrices")), symbol="torch.Tensor.H"),
    OpInfo("movedim", torch.movedim, _samples(((2, 3, 4), (0, 2), {}), ((2, 3, 4, 5), ((0, 1), (-1, 0)), {}), ((2, 3, 4), (), {"source": -1, "destination": 0}), ((), (0, 0), {}), ((2, 3, 4), (1, 1), {}), ((2, 3, 4), ((0, 2), (0, -1)), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3, 4), ((0, 1), (0,)), {}, RuntimeError, "should contain the same number of dims"), ((2, 3, 4), ((0, 0), (1, 2)), {}, RuntimeError, "repeated dim in `source`")),
           symbol="torch.movedim"),
    OpInfo("moveaxis", lambda x, s, d: x.moveaxis(s, d), _samples(((2, 3, 4), (1, 0), {}), ((2, 3, 4), (-1, 2), {})), ALL_TYPES, symbol="torch.movedim"),
    OpInfo("diagonal", torch.diagonal, _samples(((3, 4), (), {}), ((3, 4), (1,), {}), ((4, 3), (-2,), {}), ((2, 3, 4), (0, 2, 0), {}), ((3, 4), (), {"offset": 5}), ((5, 5), (), {"dim1": -1, "dim2": 0}, True)), ALL_TYPES,
           error_inputs=_errors(((2, 3, 4), (0, 1, 1), {}, RuntimeError, "diagonal dimensions cannot be identical")), symbol="torch.diagonal"),
    OpInfo("expand", lambda x, *s, **k: x.expand(*s, **k), _samples(((3, 1), (3, 4), {}), ((3, 1), (2, -1, 4), {}), ((), (2, 2), {}), ((1,), ((0,),), {}), ((3, 1), (), {"size": (3, 2)}), ((2, 3), (2, 3), {}), ((2, 3), (-1, -1), {}), ((2, 3), (1, 2, 3), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3), (3,), {}, RuntimeError, "the number of sizes provided"), ((2, 3), (-1, 2, 3), {}, RuntimeError, "isn't allowed in a leading, non-existing dimension 0"),
                                ((2, 3), (3, 3), {}, RuntimeError, "must match the existing size")), symbol="torch.Tensor.expand"),
    OpInfo("expand_as", lambda x, y: x.expand_as(y), lambda dt, dev: [SampleInput((_t((3, 1), dt, dev), _t((2, 3, 4), torch.float32, dev))), SampleInput((_t((3, 4), dt, dev), _t((3, 4), torch.float32, dev)))], ALL_TYPES, symbol="torch.Tensor.expand_as"),
    OpInfo("broadcast_to", torch.broadcast_to, _samples(((3, 1), ((2, 3, 5),), {}), ((), ((2,),), {}), ((1, 4), ((0, 4),), {}), ((2, 3), ((2, 3),), {}), ((2, 3), ((-1, 3),), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3), ((4, 3),), {}, RuntimeError, "must match the existing size")), symbol="torch.broadcast_to"),
    OpInfo("broadcast_tensors", torch.broadcast_tensors, lambda dt, dev: [SampleInput((_t((3, 1), dt, dev), _t((4,), dt, dev), _t((), dt, dev))), SampleInput((_t((2, 3), dt, dev),)), SampleInput((_t((2, 3), dt, dev), _t((2, 3), dt, dev)))], ALL_TYPES,
           error_inputs=lambda dev: [ErrorInput(SampleInput((_t((2, 3)), _t((4,)))), RuntimeError, "must match the size")], symbol="torch.broadcast_tensors"),
    OpInfo("repeat", lambda x, *r, **k: x.repeat(*r, **k), _samples(((2, 3), (2, 1), {}), ((2, 3), (1, 2, 3), {}), ((), (3,), {}), ((2,), ((0, 2),), {}), ((2, 3), (), {"repeats": (1, 2)}, True), ((2, 3), (1, 1), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3), (2,), {}, RuntimeError, "can not be smaller than number of dimensions"), ((2, 3), (-1, 1), {}, RuntimeError, "negative dimension")), symbol="torch.Tensor.repeat"),
    OpInfo("repeat_interleave", torch.repeat_interleave, _samples(((2, 3), (2,), {}), ((2, 3), (3,), {"dim": 1}), ((2, 3), (2, -2), {}), ((), (3,), {}), ((2, 3), (0, 0), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3), (-1,), {}, RuntimeError, "must be non-negative")), symbol="torch.repeat_interleave"),
    OpInfo("contiguous", lambda x: x.contiguous(), _samples(((2, 3), (), {}, True), ((), (), {}), ((2, 3), (), {})), ALL_TYPES, symbol="torch.Tensor.contiguous"),
    OpInfo("detach", torch.detach, _samples(((2, 3), (), {})), ALL_TYPES, symbol="torch.Tensor.detach"),
    OpInfo("clone", torch.clone, _samples(((2, 3), (), {}, True), ((), (), {}), ((0, 2), (), {})), ALL_TYPES, symbol="torch.clone"),
    OpInfo("clone_then_inplace", lambda x: (x.clone().mul_(2), x), _samples(((2, 3), (), {})), (torch.float32, torch.int64), symbol="torch.clone"),
]
