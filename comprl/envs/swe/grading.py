"""SWE-lite's trusted grader: a pytest plugin that runs the hidden tests in a process that never imports the
code under test, and writes the verdicts where that code cannot reach.

`comprl.envs.swe.tasks.grade_tree` starts ``python -I -m pytest -p comprl.envs.swe.grading --swe-grading
settings.json`` outside the sandbox, on a folder holding only the task's test files (the agent's own test
edits play no part). The plugin then:

- puts an import hook first on ``sys.meta_path`` that answers every import of the repository's packages with
  a `RemoteModule`: the real import happens in a `Remote` process inside the sandbox (`Sandbox.start`, with
  its memory, process and time limits), serving `comprl.envs.swe.remote`;
- runs the tests unchanged: what they do with the code's objects becomes requests, and what comes back is
  plain data (built-in objects made here, compared here) or a proxy (`RemoteObject`, an instance of a mirror
  class that has the remote class's name and exception bases, so ``pytest.raises(confkit.ParseError)`` and
  ``isinstance`` work);
- records each test's outcome from pytest's own reports in this process and writes them to the results file,
  which is outside every folder the sandbox sees.

Whatever the code under test does in its process (patch pytest there, print fake summaries, exit early,
crash, hang, rewrite the server that answers the grader) can only change what its objects answer; a crash or
hang fails the test that was waiting (the process is restarted for the next test).

Comparisons never ask the code about plain data: only exact built-in values (rebuilt here from the wire, never
a subclass) are compared by value, here. An object of the code compared with anything that is not an object of
the code (a string, a list, a number the test wrote) is unequal and unordered (``==`` is False, ``<`` raises
TypeError), whatever its ``__eq__`` would say, so code that should return plain data cannot pass a test with a
look-alike that claims equality. Among its own objects, ``==`` and ``<`` are the code's semantics, and are
asked: that trusts the code no more than its source does (an agent may rewrite ``Money.__eq__`` in the
repository as freely as patch it at run time). One such answer is checked for plausibility: an object that
claims to equal another, and also to equal an object of this process it has never seen, is the naive "always
equal" hack and fails with `ImplausibleEquality` (a heuristic: a hostile process can tell that probe apart).

Also left to the code under test, by design: the rest of the behaviour of its own objects (``len``, ``in``,
``bool``, its exceptions), and which of its classes it says are built-in exceptions.

The grading run itself is bounded (`comprl.envs.swe.tasks.grade_tree`: its own cgroup for memory and processes,
and a wall time), and the tests' temporary files are visible to the code read-only, so no link the code plants
can send the grader's writes elsewhere.
"""

from __future__ import annotations

import builtins
import importlib.abc
import importlib.machinery
import json
import operator
import select
import subprocess
import sys
import time
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from comprl.envs.swe import remote
from comprl.envs.swe.remote import LOCAL_OPERATIONS, Channel, SharedContainers, WireError, decode, encode, global_name
from comprl.envs.swe.sandbox import Sandbox, SandboxConfig, SandboxedProcess

SERVER_SOURCE = Path(remote.__file__).read_text() + "\nserve()\n"
"""What the process under test runs (``python -I -c``): the wire module, then its server loop."""
MAX_RESTARTS = 20
"""Restarts of the process under test in one grading run (after a hang or crash) before every request fails."""
_ALLOWED_REAL_EXCEPTIONS = (Exception, SystemExit)
"""Built-in exception classes a remote exception may really be an instance of here (not KeyboardInterrupt,
which would stop the test session)."""


class RemoteError(Exception):
    """The process under test timed out, died or broke the protocol while a test was waiting for it."""


class ImplausibleEquality(AssertionError):
    """An object of the code under test claimed to equal an object it has never seen (the always-equal hack)."""


def _internal(name: str) -> bool:
    return name.startswith("_rpc") or (name.startswith("__") and name.endswith("__"))


class Remote:
    """The process that imports the code under test (started on first use, restarted after a failure)."""

    def __init__(self, tree: Path, config: SandboxConfig, binds: tuple[Path, ...], stderr: Path) -> None:
        self.sandbox = Sandbox(tree, config, binds)
        self.call_timeout_s = config.timeout_s
        self.stderr = stderr
        self.generation = 0
        self.restarts = -1
        self.process: SandboxedProcess | None = None
        self.channel: Channel | None = None
        self.deadline = 0.0
        self.mirrors: dict[tuple[str, str], type] = {}
        self.locals: dict[int, Any] = {}
        self.local_numbers: dict[int, int] = {}
        self.stranger = _Stranger()
        self._forget_process()

    def _forget_process(self) -> None:
        """Drop what only meant something to the process under test that is gone: its handles and containers."""
        self.proxies: dict[int, Any] = {}
        self.classes: dict[int, type] = {}
        self.shared = SharedContainers("t")
        self.shared.encode = self.encode

    # ---- the process --------------------------------------------------------------------------------------

    def _start(self) -> None:
        self.restarts += 1
        if self.restarts > MAX_RESTARTS:
            raise RemoteError(f"the process under test failed {MAX_RESTARTS} times; giving up")
        with self.stderr.open("ab") as stderr:
            self.process = self.sandbox.start(
                [sys.executable, "-I", "-c", SERVER_SOURCE],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
            )
        popen = self.process.popen
        self._forget_process()
        self.channel = Channel(
            popen.stdout.fileno(), popen.stdin.fileno(), self._serve, self._wait, self.shared, self.decode
        )
        self.generation += 1

    def _wait(self, fd: int) -> None:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
            raise TimeoutError(f"the code under test did not answer within {self.call_timeout_s:g} s")

    def close(self) -> None:
        if self.process is not None:
            self.process.popen.stdin.close()
            self.process.close()
            self.process.popen.stdout.close()
        self.process = self.channel = None

    def request(self, message: dict) -> Any:
        """Send one request and decode its answer; an exception of the code under test is raised here."""
        if self.process is None:
            self._start()
        outer, self.deadline = self.deadline, time.monotonic() + self.call_timeout_s
        try:
            reply = self.channel.request(message)
        except (EOFError, OSError, TimeoutError, WireError, ValueError) as error:
            self.close()
            raise RemoteError(f"the process under test failed: {type(error).__name__}: {error}") from None
        finally:
            self.deadline = outer
        if "error" in reply:
            raise self._exception(reply["error"])
        return self.decode(reply.get("ok"))

    def _serve(self, message: dict) -> dict:
        """The code under test uses an object the test gave it: calls it, or reads a public attribute."""
        try:
            target = self.locals[message["id"]]
            if message.get("op") == "callback":
                result = target(*self.decode(message["args"]), **self.decode(message["kwargs"]))
            elif message.get("op") == "getattr" and not str(message["name"]).startswith("_"):
                result = getattr(target, str(message["name"]))
            elif message.get("op") == "apply" and message.get("name") in LOCAL_OPERATIONS:
                name = message["name"]
                function = getattr(operator, name, None) or getattr(builtins, name)
                result = function(target, *self.decode(message["args"]))
            else:
                raise WireError(f"the code under test may not {message.get('op')!r} an object of the test")
            return {"ok": self.encode(result)}
        except Exception as error:  # noqa: BLE001 - handed to the code under test, as its callee raised it
            return {"error": {"class": type(error).__name__, "text": str(error)}}

    # ---- values -------------------------------------------------------------------------------------------

    def encode(self, value: Any) -> Any:
        return encode(value, self._encode_other, self.shared)

    def _encode_other(self, value: Any) -> dict:
        if isinstance(value, (RemoteObject, RemoteClass)):
            return self.handle(value)
        if isinstance(value, RemoteModule):
            return {"t": "module", "v": value.__name__}
        name = global_name(value)
        if name is not None:
            return {"t": "global", "v": name}
        if isinstance(value, types.ModuleType):
            raise TypeError(f"a module of the test ({value.__name__}) cannot be handed to the code under test")
        number = self.local_numbers.setdefault(id(value), len(self.locals))
        self.locals[number] = value
        return {"t": "local", "id": number, "call": callable(value)}

    def handle(self, value: RemoteObject | RemoteClass) -> dict:
        """The handle of a proxy in the current process (found again by its path after a restart)."""
        generation, number, path = object.__getattribute__(value, "_rpc_handle")
        if generation != self.generation:
            if path is None:
                raise RemoteError("this object belonged to a process under test that has since been restarted")
            fresh = self.request({"op": "resolve", "module": path[0], "qualname": path[1]})
            generation, number, path = object.__getattribute__(fresh, "_rpc_handle")
            if isinstance(value, RemoteClass):
                type.__setattr__(value, "_rpc_handle", (generation, number, path))
            else:
                object.__setattr__(value, "_rpc_handle", (generation, number, path))
        return {"t": "class" if isinstance(value, RemoteClass) else "ref", "id": number}

    def decode(self, data: Any) -> Any:
        return decode(data, self._decode_other, self.shared)

    def _decode_other(self, data: dict) -> Any:
        tag = data["t"]
        if tag == "local":
            return self.locals[data["id"]]
        if tag == "class":
            return self._class(data)
        if tag != "ref":
            raise WireError(f"the code under test may not send {tag!r} values")
        number = data["id"]
        if number not in self.proxies:
            cls = self._mirror(data["class"])
            proxy = cls.__new__(cls)
            object.__setattr__(proxy, "_rpc_handle", (self.generation, number, _path(data)))
            self.proxies[number] = proxy
        return self.proxies[number]

    def _class(self, data: dict) -> type:
        """A class of the code under test as a value: a built-in class is itself, any other its mirror."""
        path = _path(data)
        if path is not None and path[0] == "builtins" and isinstance(getattr(builtins, path[1], None), type):
            return getattr(builtins, path[1])
        return self._mirror(data["id"])

    def _mirror(self, number: int) -> type:
        """The local class whose instances stand for instances of remote class `number`."""
        if number in self.classes:
            return self.classes[number]
        info = self.request({"op": "describe", "id": number})
        name, qualname = str(info["name"]), str(info["qualname"])
        path = (str(info["module"]), qualname)
        if path in self.mirrors:  # the same class in a restarted process: keep its mirror, so isinstance holds
            mirror = self.classes[number] = self.mirrors[path]
            type.__setattr__(mirror, "_rpc_handle", (self.generation, number, path))
            return mirror
        own = getattr(builtins, name, None) if info["module"] == "builtins" else None
        if isinstance(own, type) and issubclass(own, _ALLOWED_REAL_EXCEPTIONS):
            bases: list[type] = [own]
        else:
            bases = [base for base in info["bases"] if issubclass(base, RemoteObject)]
            bases += [base for base in info["bases"] if issubclass(base, _ALLOWED_REAL_EXCEPTIONS)]
        if info["exception"] and not any(issubclass(base, BaseException) for base in bases):
            bases.append(Exception)
        if not any(issubclass(base, RemoteObject) for base in bases):
            bases.insert(0, RemoteObject)
        namespace = {"__module__": str(info["module"]), "__qualname__": qualname, "_rpc_remote": self}
        try:
            mirror = RemoteClass(name, tuple(dict.fromkeys(bases)), namespace)
        except TypeError:  # bases whose layouts or orders cannot be combined here
            mirror = RemoteClass(name, (RemoteObject, Exception) if info["exception"] else (RemoteObject,), namespace)
        type.__setattr__(mirror, "_rpc_handle", (self.generation, number, None if "<" in qualname else path))
        self.classes[number] = mirror
        if "<" not in qualname:
            self.mirrors[path] = mirror
        return mirror

    def _exception(self, error: dict) -> BaseException:
        raised = self.decode(error["value"])
        if not isinstance(raised, BaseException):
            return RemoteError(f"the code under test raised something that is not an exception: {error['text']}")
        arguments = self.decode(error["args"])
        BaseException.__setattr__(raised, "args", arguments if isinstance(arguments, tuple) else (error["text"],))
        return raised

    # ---- requests the proxies make -------------------------------------------------------------------------

    def apply(self, name: str, target: Any, *args: Any) -> Any:
        return self.request(
            {"op": "apply", "name": name, "target": self.encode(target), "args": self.encode(list(args))}
        )

    def getattr(self, target: Any, name: str) -> Any:
        return self.request({"op": "getattr", "target": self.encode(target), "name": name})

    def setattr(self, target: Any, name: str, value: Any) -> None:
        self.request({"op": "setattr", "target": self.encode(target), "name": name, "value": self.encode(value)})

    def delattr(self, target: Any, name: str) -> None:
        self.request({"op": "delattr", "target": self.encode(target), "name": name})

    def call(self, target: Any, args: tuple, kwargs: dict) -> Any:
        message = {"op": "call", "target": self.encode(target), "args": self.encode(list(args))}
        return self.request({**message, "kwargs": self.encode(kwargs)})

    def equals(self, target: Any, other: Any, name: str) -> Any:
        """``target == other`` (or ``!=``), decided by the code under test, unless it also says so of a stranger."""
        result = self.apply(name, target, other)
        claims = bool(result) if name == "eq" else not result
        if claims:
            try:
                stranger = self.apply(name, target, self.stranger)
                implausible = bool(stranger) if name == "eq" else not stranger
            except Exception:  # noqa: BLE001 - a comparison that refuses strangers is plausible
                implausible = False
            if implausible:
                raise ImplausibleEquality(
                    f"an object of the code under test ({type(target).__qualname__}) says it "
                    f"{'equals' if name == 'eq' else 'does not differ from'} an object it has never seen; "
                    "comparisons with it are not trusted"
                )
        return result


def _path(data: dict) -> tuple[str, str] | None:
    path = data.get("path")
    return (str(path[0]), str(path[1])) if isinstance(path, list) and len(path) == 2 else None


class _Stranger:
    """An object of the test process that no value of the code under test can legitimately equal."""

    def __repr__(self) -> str:
        return "<stranger>"


def _remote_of(proxy: Any) -> Remote:
    return type(proxy)._rpc_remote


# ---- proxies ------------------------------------------------------------------------------------------------


def _is_remote(value: Any) -> bool:
    """Whether `value` stands for an object of the code under test (the only kind it may compare itself with)."""
    return isinstance(value, (RemoteObject, RemoteClass, RemoteModule))


def _comparison(name: str):
    def method(self, other):
        return _remote_of(self).apply(name, self, other) if _is_remote(other) else NotImplemented

    method.__name__ = f"__{name}__"
    return method


def _operator(name: str, reflected: bool = False):
    def method(self, *args):
        remote = _remote_of(self)
        return remote.apply(name, args[0], self) if reflected else remote.apply(name, self, *args)

    method.__name__ = f"__r{name.rstrip('_')}__" if reflected else f"__{name.rstrip('_')}__"
    return method


class _RemoteVars(Mapping):
    """``vars()`` of a remote object or module, read on demand (what ``monkeypatch`` looks at to undo)."""

    def __init__(self, remote: Remote, target: Any) -> None:
        self.remote, self.target = remote, target

    def __getitem__(self, name: str) -> Any:
        return self.remote.apply("vars_item", self.target, name)

    def __iter__(self) -> Any:
        return iter(self.remote.apply("vars_names", self.target))

    def __len__(self) -> int:
        return len(self.remote.apply("vars_names", self.target))


class RemoteObject:
    """Stands for an object that lives in the process under test; every use is a request there."""

    __slots__ = ()

    @property
    def __dict__(self) -> Mapping:
        return _RemoteVars(_remote_of(self), self)

    def __getattr__(self, name: str) -> Any:
        if _internal(name):
            raise AttributeError(name)
        return _remote_of(self).getattr(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if _internal(name):
            object.__setattr__(self, name, value)
        else:
            _remote_of(self).setattr(self, name, value)

    def __delattr__(self, name: str) -> None:
        _remote_of(self).delattr(self, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _remote_of(self).call(self, args, kwargs)

    def __eq__(self, other: Any) -> Any:
        return _remote_of(self).equals(self, other, "eq") if _is_remote(other) else NotImplemented

    def __ne__(self, other: Any) -> Any:
        return _remote_of(self).equals(self, other, "ne") if _is_remote(other) else NotImplemented

    def __hash__(self) -> int:
        return _remote_of(self).apply("hash", self)

    def __str__(self) -> str:
        return _remote_of(self).apply("str", self)

    def __repr__(self) -> str:
        return _remote_of(self).apply("repr", self)

    def __format__(self, spec: str) -> str:
        return _remote_of(self).apply("format", self, spec)

    def __bool__(self) -> bool:
        return _remote_of(self).apply("bool", self)

    def __next__(self) -> Any:
        return _remote_of(self).apply("next", self)

    def __enter__(self) -> Any:
        return _remote_of(self).call(_remote_of(self).getattr(self, "__enter__"), (), {})

    def __exit__(self, *exc_info: Any) -> Any:
        return _remote_of(self).call(_remote_of(self).getattr(self, "__exit__"), exc_info, {})


for _name in ("len", "iter", "int", "float", "index", "abs", "round", "neg", "pos", "invert", "contains",
              "getitem", "setitem", "delitem"):
    setattr(RemoteObject, f"__{_name}__", _operator(_name))
for _name in ("lt", "le", "gt", "ge"):
    setattr(RemoteObject, f"__{_name}__", _comparison(_name))
for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and_", "or_", "xor", "lshift",
              "rshift", "divmod"):
    setattr(RemoteObject, f"__{_name.rstrip('_')}__", _operator(_name))
    setattr(RemoteObject, f"__r{_name.rstrip('_')}__", _operator(_name, reflected=True))


class RemoteClass(type):
    """The metaclass of mirror classes: calling one, or using its attributes, goes to the remote class."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        return cls._rpc_remote.call(cls, args, kwargs)

    def __getattr__(cls, name: str) -> Any:
        if _internal(name):
            raise AttributeError(name)
        return cls._rpc_remote.getattr(cls, name)

    def __setattr__(cls, name: str, value: Any) -> None:
        if _internal(name):
            type.__setattr__(cls, name, value)
        else:
            cls._rpc_remote.setattr(cls, name, value)

    def __delattr__(cls, name: str) -> None:
        cls._rpc_remote.delattr(cls, name)

    def __bool__(cls) -> bool:
        return True

    def __iter__(cls) -> Any:
        return cls._rpc_remote.apply("iter", cls)

    def __len__(cls) -> int:
        return cls._rpc_remote.apply("len", cls)

    def __contains__(cls, item: Any) -> bool:
        return cls._rpc_remote.apply("contains", cls, item)

    def __getitem__(cls, key: Any) -> Any:
        return cls._rpc_remote.apply("getitem", cls, key)


class RemoteModule(types.ModuleType):
    """A module of the code under test; its attributes are fetched from the process under test."""

    def __init__(self, name: str, remote: Remote) -> None:
        super().__init__(name)
        object.__setattr__(self, "_rpc_remote", remote)

    @property
    def __dict__(self) -> Mapping:
        return _RemoteVars(self._rpc_remote, self)

    def __getattr__(self, name: str) -> Any:
        if _internal(name):
            raise AttributeError(name)
        return self._rpc_remote.getattr(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if _internal(name) or isinstance(value, types.ModuleType):  # the import system records submodules
            object.__setattr__(self, name, value)
        else:
            self._rpc_remote.setattr(self, name, value)

    def __delattr__(self, name: str) -> None:
        self._rpc_remote.delattr(self, name)


class RemoteFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports of the repository's top-level `packages` (and their submodules) become `RemoteModule` objects."""

    def __init__(self, remote: Remote, packages: tuple[str, ...]) -> None:
        self.remote, self.packages = remote, packages

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name.split(".")[0] not in self.packages:
            return None
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> RemoteModule:
        return RemoteModule(spec.name, self.remote)

    def exec_module(self, module: types.ModuleType) -> None:
        object.__setattr__(module, "__path__", [])
        self.remote.request({"op": "import", "name": module.__name__})


# ---- the pytest plugin --------------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--swe-grading", default=None, help="SWE-lite grading settings (JSON file written by comprl)")


def pytest_configure(config: pytest.Config) -> None:
    settings_file = config.getoption("--swe-grading")
    if settings_file:
        config.pluginmanager.register(Recorder(json.loads(Path(settings_file).read_text())), "swe-grading-recorder")


class Recorder:
    """Connects the tests to the process under test, and records their outcomes as pytest reports them."""

    def __init__(self, settings: dict) -> None:
        sandbox = SandboxConfig(**settings["sandbox"])  # written by grade_tree from a SandboxConfig
        binds = tuple(Path(folder) for folder in settings["binds"])
        self.remote = Remote(Path(settings["tree"]), sandbox, binds, Path(settings["stderr"]))
        self.results = Path(settings["results"])
        self.statuses: dict[str, str] = {}
        sys.meta_path.insert(0, RemoteFinder(self.remote, tuple(settings["packages"])))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        expected_failure = hasattr(report, "wasxfail")
        if report.when == "setup" and not report.passed:
            self.statuses[report.nodeid] = "ERROR" if report.failed else "XFAIL" if expected_failure else "SKIPPED"
        elif report.when == "call":
            if report.passed:
                self.statuses[report.nodeid] = "XPASS" if expected_failure else "PASSED"
            else:
                self.statuses[report.nodeid] = (
                    "FAILED" if report.failed else "XFAIL" if expected_failure else "SKIPPED"
                )
        elif report.when == "teardown" and report.failed and self.statuses.get(report.nodeid) == "PASSED":
            self.statuses[report.nodeid] = "ERROR"

    def pytest_sessionfinish(self) -> None:
        self.remote.close()
        self.results.write_text(json.dumps(self.statuses, indent=1))

