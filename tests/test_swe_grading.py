"""The trusted grader's view of the code under test (`comprl.envs.swe.grading`): what crosses the process
boundary, and what happens when the other side misbehaves. A small package is imported through the grader's
import hook, so it runs in a sandboxed process of its own."""

from __future__ import annotations

import importlib
import sys
import textwrap
import time

import pytest
from conftest import needs_sandbox

from comprl.envs.swe.grading import ImplausibleEquality, Remote, RemoteError, RemoteFinder, RemoteObject
from comprl.envs.swe.sandbox import SandboxConfig

pytestmark = needs_sandbox

PACKAGE = '''
import os

STATE = {"n": 1}


class Error(ValueError):
    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


class Box:
    def __init__(self, items):
        self.items = items  # keeps the caller's list, as the buggy code in a task might

    def add(self, item):
        self.items.append(item)

    def __eq__(self, other):
        return isinstance(other, Box) and self.items == other.items

    __hash__ = None


class Anything:
    def __eq__(self, other):
        return True


def internal():
    return STATE


def bump():
    STATE["n"] += 1


def fail(code):
    raise Error("bad input", code)


def apply(function, value):
    return function(value)


def hang():
    while True:
        pass


def die():
    os._exit(3)


print("printed at import, never read by the grader")
'''


@pytest.fixture()
def probe(tmp_path):
    package = tmp_path / "repo" / "grading_probe"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(textwrap.dedent(PACKAGE))
    remote = Remote(tmp_path / "repo", SandboxConfig(timeout_s=3), (), tmp_path / "stderr.log")
    finder = RemoteFinder(remote, ("grading_probe",))
    sys.meta_path.insert(0, finder)
    try:
        yield importlib.import_module("grading_probe")
    finally:
        sys.meta_path.remove(finder)
        sys.modules.pop("grading_probe", None)
        remote.close()


def test_plain_values_are_built_here_and_stay_aliased(probe):
    state = probe.internal()
    assert type(state) is dict and state == {"n": 1}
    probe.bump()
    assert state["n"] == 2, "a dict the code handed out must see the code's later changes"
    items = [1]
    box = probe.Box(items)
    box.add(2)
    assert items == [1, 2], "a list the test handed in must see the code's changes"
    items.append(3)
    assert box.items == [1, 2, 3]


def test_exceptions_keep_their_class_hierarchy_and_attributes(probe):
    with pytest.raises(probe.Error) as info:
        probe.fail(7)
    assert isinstance(info.value, ValueError) and isinstance(info.value, RemoteObject)
    assert info.value.code == 7 and str(info.value) == "bad input" and info.value.args == ("bad input", )


def test_the_code_can_call_back_into_the_test(probe):
    assert probe.apply(lambda value: value * 2, 21) == 42
    assert probe.apply(len, "abc") == 3


def test_always_equal_objects_are_caught_and_honest_equality_is_not(probe):
    with pytest.raises(ImplausibleEquality):
        assert probe.Anything() == probe.Box([1])
    assert probe.Box([1]) == probe.Box([1]) and probe.Box([1]) != probe.Box([2])


def test_an_object_of_the_code_never_equals_plain_data(probe):
    """Plain data is compared here only: the code's ``__eq__`` is not asked, whatever it would answer."""
    anything = probe.Anything()
    assert not anything == "expected" and anything != "expected" and "expected" != anything
    assert [anything] != ["expected"] and {"k": anything} != {"k": "expected"}
    with pytest.raises(TypeError):
        assert anything < 3


def test_a_hang_or_a_crash_fails_that_request_and_the_next_one_gets_a_fresh_process(probe):
    started = time.monotonic()
    with pytest.raises(RemoteError, match="did not answer"):
        probe.hang()
    assert time.monotonic() - started < 20
    assert probe.apply(len, "after a hang") == 12
    with pytest.raises(RemoteError, match="closed"):
        probe.die()
    assert probe.internal() == {"n": 1}
