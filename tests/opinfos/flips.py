"""OpInfos for the ops of squall.ltorch.flips."""
from __future__ import annotations

import torch

from opinfos import ALL_TYPES, OpInfo
from opinfos import forms_errors as _errors, forms_samples as _samples, tensor as _t




opinfos = [
    OpInfo("flip", torch.flip, _samples(((2, 3, 4), ((0, 2),), {}), ((2, 3), ((-1,),), {}, True), ((), ((),), {}), ((2, 0), ((0, 1),), {}), ((2, 3), ((),), {})), ALL_TYPES,
           error_inputs=_errors(((2, 3), ((0, 0),), {}, RuntimeError, "dim 0 appears multiple times"), ((2, 3), ((2,),), {}, IndexError, "Dimension out of range")), symbol="torch.Tensor.flip"),
    OpInfo("flip_varargs", lambda x, *d: x.flip(*d), _samples(((2, 3, 4), (0, 1), {})), ALL_TYPES, symbol="torch.Tensor.flip"),
    OpInfo("fliplr", torch.fliplr, _samples(((2, 3), (), {}), ((2, 3, 4), (), {})), ALL_TYPES, error_inputs=_errors(((3,), (), {}, RuntimeError, "Input must be >= 2-d")), symbol="torch.fliplr"),
    OpInfo("flipud", torch.flipud, _samples(((2, 3), (), {}), ((4,), (), {})), ALL_TYPES, error_inputs=_errors(((), (), {}, RuntimeError, "Input must be >= 1-d")), symbol="torch.flipud"),
    OpInfo("roll", torch.roll, _samples(((4, 3), (1,), {}), ((4, 3), (-5, 0), {}), ((4, 3), ((1, 2), (0, 1)), {}), ((4, 3), (3, -1), {}, True), ((0, 3), (1, 0), {}), ((), (2,), {}), ((4, 3), (0, 1), {}), ((4, 3), ((0, 3), (0, 1)), {}), ((4, 3), (4, 0), {})), ALL_TYPES,
           error_inputs=_errors(((4, 3), ((1, 2), 0), {}, RuntimeError, "shifts and dimensions must align")), symbol="torch.roll"),
    OpInfo("rot90", torch.rot90, _samples(((3, 4), (), {}), ((3, 4), (2,), {}), ((2, 3, 4), (-1, (1, 2)), {}), ((3, 4), (4,), {}), ((3, 4), (0,), {}), ((3, 4), (), {"k": 3, "dims": (1, 0)})), ALL_TYPES,
           error_inputs=_errors(((3, 4), (1, (0,)), {}, RuntimeError, "expected total rotation dims == 2"), ((3, 4), (1, (0, 0)), {}, RuntimeError, "expected rotation dims to be different"),
                                ((3,), (), {}, RuntimeError, "expected total dims >= 2")), symbol="torch.rot90"),
    OpInfo("tril", torch.tril, _samples(((4, 4), (), {}), ((3, 5), (1,), {}), ((2, 3, 4), (), {"diagonal": -1}), ((0, 3), (), {}), ((4, 3), (-5,), {}, True)), ALL_TYPES,
           error_inputs=_errors(((3,), (), {}, RuntimeError, "must have at least 2 dimensions")), symbol="torch.tril"),
    OpInfo("triu", torch.triu, _samples(((4, 4), (), {}), ((3, 5), (2,), {}), ((2, 3, 4), (), {"diagonal": -1})), ALL_TYPES,
           error_inputs=_errors(((3,), (), {}, RuntimeError, "must have at least 2 dimensions")), symbol="torch.triu"),
]
