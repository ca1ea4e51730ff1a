"""Recording copies of containers: the lists, deques, dicts and sets a traced program reaches
through its state, or is given, while it is traced (`squall.frontend.state_guards`).

A copy notes what the program reads of it (the items, or the whole), so that reads become guards
and a container only appended to (a log) is not guarded on contents that change every call;
what it adds is replayed at every call; any other change is refused where it is made. The
recorder that makes them is `squall.frontend.recording_copies.RecordingCopies`.
"""
from __future__ import annotations

import collections
from collections.abc import Callable

from .state_views import _RECORDED_AS, UnreplayableWrite, _where

class _RecordedList(list):
    """A list the program reached, copied: notes whether its items were read, so that a list
    only appended to (a log) is not guarded on its contents, which change every call; a change
    other than appending is refused where it is made. `target` is the call-time expression of a
    list passed as an argument (its items are in the cache key; its appends are replayed on the
    caller's list), else None."""

    __slots__ = ("items_read", "label", "initial", "real", "target", "items_set")


def _noting_read(base: Callable) -> Callable:
    def reading(self, *args):
        self.items_read = True
        return base(self, *args)

    return reading


def _refused(name: str, allowed: str = "appending to it") -> Callable:
    def change(self, *args):
        raise UnreplayableWrite(
            f"squall: the program changes {self.label} other than by {allowed} ({name}, at {_where()}); "
            "squall cannot replay that at every call"
        )

    return change


for _name in ("__iter__", "__len__", "__getitem__", "__contains__", "__reversed__", "index", "count", "copy", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__add__", "__mul__", "__rmul__", "__repr__"):
    setattr(_RecordedList, _name, _noting_read(getattr(list, _name)))
for _name in ("pop", "insert", "remove", "clear", "sort", "reverse", "__delitem__", "__imul__"):
    setattr(_RecordedList, _name, _refused(_name))
_refused_slice_set = _refused("__setitem__")


def _setting_item(self, index, value):
    # an item set at an int index (MiniMax's cache: `self.linear_cache[layer_idx] = state` at every
    # step) is set again at every call (StateRecorder.finish); a slice's is refused, and so is a
    # change C code makes without this method (heapq's), whose reads of the items are not seen
    if type(index) is not int:
        _refused_slice_set(self, index, value)
    list.__setitem__(self, index, value)
    try:
        set_at = self.items_set
    except AttributeError:
        set_at = self.items_set = set()
    set_at.add(index if index >= 0 else index + len(self))


_RecordedList.__setitem__ = _setting_item


class _RecordedDeque(collections.deque):
    """A deque the program reached or was given, copied: read as a list is (its items guarded
    once read, an argument's being in the cache key); items appended on the right are appended
    again at every call (the deque's maxlen dropping from the left as eager's does); any other
    change is refused where it is made. `target` as for a list."""

    __slots__ = ("items_read", "label", "real", "target", "appended")

    def append(self, item):
        self.appended.append(item)
        collections.deque.append(self, item)

    def extend(self, items):
        for item in list(items):
            self.append(item)

    def __iadd__(self, items):
        self.extend(items)
        return self


for _name in ("__iter__", "__len__", "__getitem__", "__contains__", "__reversed__", "index", "count", "copy", "__copy__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__add__", "__mul__", "__rmul__", "__repr__"):
    setattr(_RecordedDeque, _name, _noting_read(getattr(collections.deque, _name)))
for _name in ("appendleft", "extendleft", "pop", "popleft", "rotate", "clear", "remove", "insert", "reverse", "__setitem__", "__delitem__", "__imul__"):
    setattr(_RecordedDeque, _name, _refused(_name, "appending to it on the right"))


class _DictRecording:
    """The recording behaviour of a dict the program reached, copied (`_RecordedDict`, and the
    same for an OrderedDict or defaultdict): an item read by key is guarded by itself (a key
    squall can name: a plain number or string), a read of the whole (iteration, len, a key
    of another type) guards all its items; items set are set again at every call, in the
    order the program set them; any other change is refused where it is made. `target` is
    the call-time expression of a dict passed as an argument (its keys are in the cache key,
    so its reads need no guard; its writes are replayed on the caller's dict), else None."""

    __slots__ = ()

    def __getitem__(self, key):
        try:
            value = super().__getitem__(key)
        except KeyError:
            if key not in self.keys_set:
                self.recorder._read_key(self, key, False)  # absent (a program may catch the KeyError)
            raise
        return value if key in self.keys_set else self.recorder._read_item(self, key, value)

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def get(self, key, default=None):
        return self[key] if key in self else default

    def __contains__(self, key):
        found = super().__contains__(key)
        if key not in self.keys_set:
            self.recorder._read_key(self, key, found)
        return found

    def __setitem__(self, key, value):
        self.keys_set[key] = None
        super().__setitem__(key, value)

    def update(self, *args, **kwargs):
        for key, value in dict(*args, **kwargs).items():
            self[key] = value

    def __ior__(self, other):
        self.update(other)
        return self


def _noting_whole_read(name: str) -> Callable:
    def reading(self, *args):
        self.whole_read = True
        return getattr(super(_DictRecording, self), name)(*args)

    return reading


for _name in ("__iter__", "__len__", "__reversed__", "keys", "values", "items", "copy", "__eq__", "__or__", "__ror__", "__repr__"):
    setattr(_DictRecording, _name, _noting_whole_read(_name))
for _name in ("pop", "popitem", "clear", "__delitem__", "move_to_end"):
    setattr(_DictRecording, _name, _refused(_name, "setting items"))

_DICT_SLOTS = ("recorder", "real", "label", "whole_read", "keys_set", "target", "routed")


class _RecordedDict(_DictRecording, dict):
    __slots__ = _DICT_SLOTS


class _RecordedOrderedDict(_DictRecording, collections.OrderedDict):
    __slots__ = _DICT_SLOTS


class _RecordedDefaultDict(_DictRecording, collections.defaultdict):
    __slots__ = _DICT_SLOTS

    def __missing__(self, key):
        # eager's `dd[key]` of an absent key sets the factory's value: a read of the key's
        # absence and a write, both as for any key
        if key not in self.keys_set:
            self.recorder._read_key(self, key, False)
        return collections.defaultdict.__missing__(self, key)


class _RecordedCounter(_DictRecording, collections.Counter):
    __slots__ = _DICT_SLOTS

    def __getitem__(self, key):
        # eager's `c[key]` of an absent key is 0, nothing set: a read of the key's absence
        if dict.__contains__(self, key):
            return _DictRecording.__getitem__(self, key)
        if key not in self.keys_set:
            self.recorder._read_key(self, key, False)
        return 0

    update, subtract = collections.Counter.update, collections.Counter.subtract  # (counting, through the copy's reads and sets)


# the recording copy's class for each container class followed exactly (not their subclasses)
RECORDED_DICT_TYPES = {dict: _RecordedDict, collections.OrderedDict: _RecordedOrderedDict, collections.defaultdict: _RecordedDefaultDict,
                       collections.Counter: _RecordedCounter}


class _RecordedSet(set):
    """A set the program reached, copied: a read of it (membership, len, iteration) guards its
    whole contents; items added are added again at every call; any other change is refused."""

    __slots__ = ("recorder", "real", "label", "whole_read", "added", "target")

    def add(self, item):
        self.added.append(item)
        set.add(self, item)

    def update(self, *others):
        for other in others:
            for item in other:
                self.add(item)

    def __ior__(self, other):
        self.update(other)
        return self


def _noting_set_read(name: str) -> Callable:
    base = getattr(set, name)

    def reading(self, *args):
        self.whole_read = True
        return base(self, *args)

    return reading


for _name in ("__iter__", "__len__", "__contains__", "copy", "__eq__", "__ne__", "__or__", "__ror__", "__and__", "__rand__", "__sub__", "__rsub__", "__xor__", "__rxor__", "__le__", "__lt__", "__ge__", "__gt__", "union", "intersection", "difference", "symmetric_difference", "issubset", "issuperset", "isdisjoint", "__repr__"):
    setattr(_RecordedSet, _name, _noting_set_read(_name))
for _name in ("remove", "discard", "pop", "clear", "__isub__", "__iand__", "__ixor__", "difference_update", "intersection_update", "symmetric_difference_update"):
    setattr(_RecordedSet, _name, _refused(_name, "adding to it"))

RECORDED_CONTAINERS = (_RecordedList, _RecordedDeque, *RECORDED_DICT_TYPES.values(), _RecordedSet)
_RECORDED_AS.update({_RecordedList: list, _RecordedDeque: collections.deque, _RecordedSet: set, **{copy: real for real, copy in RECORDED_DICT_TYPES.items()}})
