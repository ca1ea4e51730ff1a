"""squall.runtime.choices.ChoiceStore: winners remembered on disk, shared by processes."""
from __future__ import annotations

import json

from squall.runtime.choices import ChoiceStore


def test_two_stores_of_one_file_keep_each_others_choices(tmp_path):
    # two processes (ranks of one job) each read the file at their start and add their own choices
    path = tmp_path / "choices.json"
    first, second = ChoiceStore(path), ChoiceStore(path)
    assert first.get("a") is None and second.get("b") is None  # both have read the (missing) file
    first.put("a", {"winner": "torch"})
    second.put("b", {"winner": "fused"})
    first.put("c", {"winner": "fused"})
    assert json.loads(path.read_text()) == {"a": {"winner": "torch"}, "b": {"winner": "fused"}, "c": {"winner": "fused"}}
    assert ChoiceStore(path).get("b") == {"winner": "fused"}


def test_a_damaged_file_or_an_unwritable_folder_costs_only_the_memory(tmp_path):
    path = tmp_path / "choices.json"
    path.write_text("{not json")
    store = ChoiceStore(path)
    assert store.get("a") is None
    store.put("a", {"winner": "torch"})
    assert json.loads(path.read_text()) == {"a": {"winner": "torch"}}
    blocked = tmp_path / "file"
    blocked.write_text("")
    kept = ChoiceStore(blocked / "choices.json")  # its folder is a file: nothing can be written
    kept.put("a", {"winner": "torch"})
    assert kept.get("a") == {"winner": "torch"}  # remembered for the process all the same
    assert ChoiceStore(path, required="offer").get("a") is None  # a choice without the required field is not one
