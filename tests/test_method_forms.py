"""Every call form torch accepts for the size- and dim-taking ops, method and function, against eager.

torch.Tensor methods take sizes and dims as varargs (`x.expand(2, 3)`), as one sequence
(`x.expand((2, 3))`), a `torch.Size`, or by keyword; the torch functions take one sequence.
squall's ops accept what eager accepts, give eager's values, and refuse what eager refuses
with eager's exception type.
"""
from __future__ import annotations

import warnings

import pytest
import torch

import squall

# op -> its forms (each a call on a [1, 3] tensor)
FORMS = {
    "broadcast_to": [lambda t: t.broadcast_to(2, 3), lambda t: t.broadcast_to((2, 3)), lambda t: t.broadcast_to(torch.Size([2, 3])),
                     lambda t: t.broadcast_to(size=(2, 3)), lambda t: torch.broadcast_to(t, (2, 3)), lambda t: torch.broadcast_to(t, size=[2, 3])],
    "expand": [lambda t: t.expand(2, 3), lambda t: t.expand((2, 3)), lambda t: t.expand(size=(2, 3)), lambda t: t.expand(2, -1),
               lambda t: t.expand(torch.Size([2, 3]))],
    "view": [lambda t: t.view(3, 1), lambda t: t.view((3, 1)), lambda t: t.view([3, -1]), lambda t: t.view(torch.Size([3, 1]))],
    "reshape": [lambda t: t.reshape(3, 1), lambda t: t.reshape((3, 1)), lambda t: t.reshape(shape=(3, 1)), lambda t: torch.reshape(t, (3,))],
    "permute": [lambda t: t.permute(1, 0), lambda t: t.permute((1, 0)), lambda t: t.permute([1, 0]), lambda t: t.permute(dims=(1, 0)),
                lambda t: torch.permute(t, (1, 0))],
    "repeat": [lambda t: t.repeat(2, 1), lambda t: t.repeat((2, 1)), lambda t: t.repeat(repeats=(2, 1)), lambda t: t.repeat(torch.Size([2, 1]))],
    "tile": [lambda t: t.tile(2, 1), lambda t: t.tile((2, 1)), lambda t: t.tile(2), lambda t: torch.tile(t, (2, 1))],
    "flip": [lambda t: t.flip(0, 1), lambda t: t.flip((0, 1)), lambda t: t.flip([1]), lambda t: torch.flip(t, (1,))],
    "new_zeros": [lambda t: t.new_zeros(2, 3), lambda t: t.new_zeros((2, 3)), lambda t: t.new_zeros(size=(2, 3)), lambda t: t.new_zeros(torch.Size([2, 3]))],
    "new_ones": [lambda t: t.new_ones(2, 3), lambda t: t.new_ones((2, 3)), lambda t: t.new_ones([2, 3])],
    "new_full": [lambda t: t.new_full((2, 3), 1.5), lambda t: t.new_full(size=(2, 3), fill_value=1.5)],
    "new_empty": [lambda t: t.new_empty(2, 3).shape, lambda t: t.new_empty((2, 3)).shape, lambda t: t.new_empty_strided((2, 3), (3, 1)).shape],
    "sum": [lambda t: t.sum(dim=(0, 1)), lambda t: t.sum([0, 1]), lambda t: t.sum(0, True), lambda t: t.sum(-1), lambda t: torch.sum(t, (0, 1))],
    "reductions": [lambda t: t.mean((0, 1)), lambda t: t.amax((0, 1)), lambda t: t.std(dim=(1,)), lambda t: t.norm(dim=(0, 1)),
                   lambda t: t.logsumexp((0, 1)), lambda t: (t > 0).any(dim=(0, 1)), lambda t: t.count_nonzero(dim=(0, 1))],
    "squeeze": [lambda t: t.squeeze((0,)), lambda t: t.squeeze(0), lambda t: t.unsqueeze(dim=0)],
    "movedim": [lambda t: t.movedim(0, 1), lambda t: t.movedim((0, 1), (1, 0)), lambda t: t.transpose(dim0=0, dim1=1)],
    "unflatten": [lambda t: t.unflatten(1, (3, 1)), lambda t: t.unflatten(dim=1, sizes=(3, 1))],
    "roll": [lambda t: t.roll((1,), (1,)), lambda t: t.roll(1, 1)],
}

# forms eager refuses: squall refuses them with eager's exception type
REFUSED = {
    "broadcast_to_function_varargs": lambda t: torch.broadcast_to(t, 2, 3),
    "permute_function_varargs": lambda t: torch.permute(t, 1, 0),
    "tile_function_varargs": lambda t: torch.tile(t, 2, 1),
    "reshape_function_varargs": lambda t: torch.reshape(t, 3, 1),
    "view_mixed": lambda t: t.view(3, (1,)),
    "expand_mixed": lambda t: t.expand((2, 3), 1),
    "expand_both": lambda t: t.expand(2, 3, size=(2, 3)),
    "broadcast_to_mismatch": lambda t: t.broadcast_to(2, 4),
    "repeat_too_few": lambda t: t.repeat(2),
    "permute_duplicate": lambda t: t.permute(0, 0),
}


@pytest.mark.parametrize("form", [pytest.param(form, id=f"{op}-{i}") for op, forms in FORMS.items() for i, form in enumerate(forms)])
def test_call_form_matches_eager(form):
    x = torch.randn(1, 3)
    torch.testing.assert_close(squall.jit(form)(x), form(x))


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_form_raises_eagers_error(name):
    form = REFUSED[name]
    x = torch.randn(1, 3)
    with pytest.raises(Exception) as eager:
        form(x)
    with pytest.raises(eager.type), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        squall.jit(form)(x)
