"""OpInfos for the ops of squall.ltorch.joins_and_splits."""
from __future__ import annotations

import torch

from opinfos import ALL_TYPES, ErrorInput, OpInfo, SampleInput
from opinfos import forms_errors as _errors, forms_samples as _samples, tensor as _t




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


def _diff_samples(dtype, device):
    yield from _samples(((5,), (), {}), ((4, 6), (), {"dim": 0}, True), ((4, 6), (2, 1), {}, True), ((3, 4, 5), (), {"n": 3, "dim": -2}),
                        ((5,), (7,), {}), ((0,), (2,), {}), ((4, 6), (0,), {}, True), ((1, 3), (), {"dim": 0}))(dtype, device)
    x = _t((3, 4), dtype, device)
    yield SampleInput((x,), {"dim": 1, "prepend": _t((3, 1), dtype, device), "append": _t((3, 2), dtype, device)})
    yield SampleInput((x, 2, 0), {"append": _t((1, 4), torch.int64, device)})  # promoted as cat promotes
    yield SampleInput((_t((0,), dtype, device),), {"n": 2, "prepend": _t((3,), dtype, device)})


def _diff_errors(device):
    yield from _errors(((), (), {}, RuntimeError, "at least one-dimensional"), ((5,), (-1,), {}, RuntimeError, "order must be non-negative but got -1"),
                       ((5,), (1.5,), {}, TypeError, "argument 'n'.* must be int, not float"), ((2, 3), (1, 2), {}, IndexError, "Dimension out of range"))(device)
    x = _t((2, 3), device=device)
    yield ErrorInput(SampleInput((x,), {"prepend": _t((3,), device=device)}), RuntimeError, "same dimension as input")
    yield ErrorInput(SampleInput((x,), {"dim": 1, "append": _t((3, 3), device=device)}), RuntimeError, r"input.size\(0\) = 2, but got tensor.size\(0\) = 3")
    yield ErrorInput(SampleInput((x,), {"prepend": 1.0}), TypeError, "argument 'prepend' must be Tensor")


opinfos = [
    OpInfo("cat", torch.cat, _seq_samples(([(2, 3), (4, 3)], {}), ([(2, 3), (2, 1)], {"dim": -1}), ([(0, 3), (2, 3)], {}), ([(2, 3)], {}), ([(0,), (2, 3), (0,)], {"dim": 1}), ([(2, 3)], {"dim": 1})), ALL_TYPES,
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
    OpInfo("split", torch.split, _samples(((5, 3), (2,), {}), ((5, 3), ([1, 4],), {}), ((2, 6), (3, -1), {}), ((0, 3), (2,), {}), ((4, 3), (), {"split_size_or_sections": [1, 0, 3], "dim": 0}, True)), ALL_TYPES,
           error_inputs=_errors(((2, 3), (0,), {}, RuntimeError, "split_size can only be 0"), ((2, 3), ([1, 2],), {}, RuntimeError, "expects split_sizes to sum exactly to 2")), symbol="torch.split"),
    OpInfo("split_method", lambda x, *a, **k: x.split(*a, **k), _samples(((5, 3), (2,), {}), ((5, 3), (), {"split_size": [2, 1], "dim": 1})), ALL_TYPES, symbol="torch.Tensor.split"),
    OpInfo("chunk", torch.chunk, _samples(((5, 3), (3,), {}), ((6, 3), (4,), {}), ((2, 7), (3, -1), {}), ((0,), (3,), {}), ((2, 3), (5,), {"dim": 1})), ALL_TYPES,
           error_inputs=_errors(((2, 3), (0,), {}, RuntimeError, "greater than 0"), ((), (1,), {}, RuntimeError, "at least a 1-dimensional tensor")), symbol="torch.chunk"),
    OpInfo("unbind", torch.unbind, _samples(((3, 2), (), {}), ((3, 2), (-1,), {}), ((0, 2), (1,), {})), ALL_TYPES,
           error_inputs=_errors(((), (), {}, IndexError, "tensor has no dimensions"), ((2, 3), (2,), {}, IndexError, "Dimension out of range")), symbol="torch.unbind"),
    OpInfo("tensor_split", torch.tensor_split, _samples(((7, 2), (3,), {}), ((7, 2), ([1, 5],), {}), ((2, 7), ([-2, 9, 3],), {"dim": 1}), ((3,), (5,), {}), ((6, 2), (), {"sections": 2}), ((6, 2), (), {"indices": (2,)})), ALL_TYPES,
           error_inputs=_errors(((2, 3), (0,), {}, RuntimeError, "number of sections must be larger than 0")), symbol="torch.tensor_split"),
    OpInfo("diff", torch.diff, _diff_samples, ALL_TYPES, error_inputs=_diff_errors, symbol="torch.diff"),
    OpInfo("diff_method", lambda x, *a, **k: x.diff(*a, **k), _samples(((4, 6), (1, 0), {}, True), ((5,), (), {"n": 2})), ALL_TYPES, symbol="torch.diff"),
    OpInfo("narrow", torch.narrow, _samples(((5, 3), (0, 1, 3), {}), ((5, 3), (-1, -2, 2), {}), ((5, 3), (0, 5, 0), {}), ((4, 6), (1, 2, 3), {}, True), ((5, 3), (0, 0, 5), {}), ((5, 3), (-1, 0, 3), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3), (0, 3, 1), {}, IndexError, "start out of range"), ((2, 3), (0, 1, 3), {}, RuntimeError, r"start \(1\) \+ length \(3\) exceeds"),
                                ((), (0, 0, 1), {}, RuntimeError, "cannot be applied to a 0-dim tensor"), ((2, 3), (0, 0, -1), {}, RuntimeError, "length must be non-negative")), symbol="torch.narrow"),
    OpInfo("select", torch.select, _samples(((5, 3), (0, 1), {}), ((5, 3), (1, -1), {}), ((2, 4, 3), (-2, 3), {}), ((4, 6), (0, 0), {}, True), ((5,), (0, -5), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3), (0, 2), {}, IndexError, r"index 2 out of range for tensor of size \[2, 3\] at dimension 0"),
                                ((2, 3), (1, -4), {}, IndexError, "index -4 out of range"), ((), (0, 0), {}, IndexError, "cannot be applied to a 0-dim tensor")), symbol="torch.select"),
    OpInfo("unfold", lambda x, *a, **k: x.unfold(*a, **k), _samples(((7,), (0, 3, 2), {}), ((2, 6, 3), (1, 2, 2), {}), ((2, 6), (-1, 6, 1), {}), ((), (0, 1, 1), {}), ((3, 4), (), {"dimension": 0, "size": 0, "step": 1})), ALL_TYPES,
           error_inputs=_errors(((3,), (0, 4, 1), {}, RuntimeError, "maximum size for tensor at dimension 0 is 3 but size is 4"), ((3,), (0, 2, 0), {}, RuntimeError, "step is 0 but must be > 0")), symbol="torch.Tensor.unfold"),
]
