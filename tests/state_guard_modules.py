"""Modules the state-guard tests share (tests/test_state_guards*.py)."""
from __future__ import annotations

import torch
from torch import nn
from torch.testing import assert_close


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.scale = 2.0
        self.relu = True
        self.mode = "add"

    def forward(self, x):
        y = self.lin(x) * self.scale
        if self.relu:
            y = torch.relu(y)
        return y + 1 if self.mode == "add" else y - 1


def check(jitted, eager, *args):
    assert_close(jitted(*args), eager(*args))


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.scale = 2.0

    def forward(self, x):
        return self.lin(x) * self.scale
