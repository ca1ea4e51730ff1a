"""OpInfos for the ops of squall.ltorch.padding."""
from __future__ import annotations

import torch

from opinfos import ALL_TYPES, OpInfo
from opinfos import forms_errors as _errors, forms_samples as _samples, tensor as _t




opinfos = [
    OpInfo("pad", torch.nn.functional.pad, _samples(((2, 3), ((1, 2),), {}), ((2, 3), ((1, 1, 0, 2),), {"value": 1}), ((2, 3, 4), ((-1, 2, 1, -1),), {}), ((0, 3), ((1, 1, 1, 1),), {}), ((2, 3), ((),), {}), ((3, 4), ((2, 0),), {"mode": "constant", "value": 0}, True), ((2, 3), ((0, 0),), {}), ((2, 3, 4), ((0, 0, 0, 0),), {"value": 1})), ALL_TYPES,
           error_inputs=_errors(((2, 3), ((1,),), {}, RuntimeError, "divisible by 2"), ((2, 3), ((1, 1) * 3,), {}, RuntimeError, "less than or equal to two times the input dimension")), symbol="torch.nn.functional.pad"),
    OpInfo("pad_modes", torch.nn.functional.pad, _samples(((2, 3, 5), ((2, 1),), {"mode": "reflect"}), ((2, 3, 5), ((2, 1, 1, 0),), {"mode": "replicate"}), ((2, 3, 5), ((3, 1),), {"mode": "circular"}), ((2, 4), ((0, 3),), {"mode": "reflect"}), ((2, 3, 5), ((0, 0),), {"mode": "reflect"}), ((2, 3, 5), ((0, 0, 0, 0),), {"mode": "replicate"}), ((2, 3, 5), ((0, 0),), {"mode": "circular"})),
           (torch.float32, torch.float64), error_inputs=_errors(((2, 3), ((3, 3),), {"mode": "reflect"}, RuntimeError, "Padding size should be less than the corresponding input dimension"),
                                                    ((5,), ((1, 1),), {"mode": "replicate"}, NotImplementedError, "Padding size 2 is not supported for 1D input tensor")), symbol="torch.nn.functional.pad"),
]
