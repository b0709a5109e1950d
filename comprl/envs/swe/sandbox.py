"""`Sandbox`: run an agent's shell command inside one workspace folder, confined by bubblewrap.

SWE-lite lets the actor run arbitrary bash. Every command runs under ``bwrap`` (Debian package
``bubblewrap``) in fresh namespaces:

- the filesystem is a new empty root with the system's programs (``/usr``, ``/lib*``, the few ``/etc`` files
  programs need) and the Python interpreter bound read-only; the episode's workspace is the only writable
  host folder, bound at ``/repo``; ``/tmp`` is a small private tmpfs; the rest of the root is read-only;
  nothing else of the host is visible, so neither the task data (hidden tests) nor other episodes'
  workspaces can be read;
- no privileges: the command runs in a new user namespace as the unprivileged ``nobody`` (`SANDBOX_UID`; the
  host's root is mapped to it, so the workspace's files are its own), with every capability dropped (none in
  its effective, permitted, inheritable, ambient or bounding sets) and no way to create further user
  namespaces (``--disable-userns``, bubblewrap >= 0.8), so it can neither mount nor ``unshare`` its way to a
  cgroup file system, nor raise the limits below;
- no network (a new network namespace holds only a loopback device), its own PID namespace (a command's
  background processes die with it), its own IPC and UTS namespaces, a new session (no terminal injection);
- no variable of the host's environment: bwrap itself starts with an empty environment (it is PID 1 inside,
  and its ``/proc/1/environ`` is readable there), the command gets only the few variables set here;
- no host path of the episode: bwrap reads its options from an in-memory file (``--args FD``), so its command
  line, which ``/proc/1/cmdline`` shows inside, holds only the command; the workspace is a tmpfs of its own, so
  ``/proc/self/mountinfo`` names it only as ``/repo`` (with ``episode_limits=False`` it is a bind of a host
  folder, whose path mountinfo shows);
- a seccomp filter (`comprl.envs.swe.seccomp`) makes the system calls that an agent fixing a Python repository
  never needs fail with EPERM: io_uring, ptrace and the other ways into a sibling process, bpf, perf events,
  userfaultfd, keyrings, mounts, namespaces, modules;
- limits: a wall-clock timeout that kills the whole process tree, a cap on the output kept (the rest is read
  and dropped, so ``yes`` cannot fill memory), an rlimit on file size, and, for everything a command starts
  taken together, memory and process counts enforced by the kernel (`CommandCgroup`: a cgroup per command,
  v1 or v2, which also holds for root, unlike RLIMIT_NPROC); the episode's workspace is a tmpfs of fixed
  size and inode count (`mount_quota`), so its disk use and its number of files are bounded too. Both need root
  (or a delegated cgroup); where that is impossible, ``SandboxConfig(episode_limits=False)`` falls back to
  per-process rlimits, which a hostile agent can exceed with several processes or files. (cgroup v2 support
  follows the kernel's interface but is untested where only v2 controllers are mounted; under v2 the parent
  cgroup must delegate memory and pids, and SWE-lite's grading run, which holds the cgroups of the code it starts
  inside its own, needs the same.)

`Sandbox.run` never raises for anything the command does: a timeout, a crash or an oversized output is
reported in the returned `CommandResult`. Missing ``bwrap`` raises `SandboxUnavailable` naming the package.
"""

from __future__ import annotations

import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from comprl.envs.swe.seccomp import UnsupportedMachine, filter_program

WORKSPACE_MOUNT = "/repo"
"""Where the workspace appears inside the sandbox (and the path the agent is told about)."""
SANDBOX_UID = SANDBOX_GID = 65534
"""The user and group every sandboxed command runs as: ``nobody``, in a user namespace of its own."""
_HARDENING = (
    "--unshare-all", "--unshare-user", "--disable-userns", "--cap-drop", "ALL",
    "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID),
)  # fmt: skip
"""bwrap's options for fresh namespaces, an unprivileged user and no capabilities (the module docstring)."""

_SYSTEM_DIRS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin")
_ETC_FILES = (
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
)


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create namespaces on this machine."""


@dataclass(frozen=True)
class SandboxConfig:
    """Limits for every command run in a `Sandbox`."""

    timeout_s: float = 30.0
    """Wall-clock seconds before the command and everything it started are killed."""
    output_chars: int = 10_000
    """Characters of combined stdout/stderr kept; longer output keeps its head and tail around a marker."""
    memory_mb: int = 2048
    """Memory of all processes of one command together, page cache and ``/tmp`` included (the memory cgroup's
    limit); with ``episode_limits=False``, the address space of each process (RLIMIT_AS)."""
    file_size_mb: int = 64
    """Largest file a command may write (RLIMIT_FSIZE)."""
    max_processes: int = 256
    """Processes and threads of one command at once (the pids cgroup's limit); with ``episode_limits=False``,
    new processes the user may add to the machine's current count (RLIMIT_NPROC, which root ignores)."""
    tmp_size_mb: int = 256
    """Size of the private ``/tmp``."""
    workspace_mb: int = 256
    """Disk quota of an episode's workspace: it lives on a tmpfs of this size (SWE-lite repositories are <1 MB).
    SWE-lite's grading copy of a submission, which the code under test may write to, is a tmpfs of this size too."""
    workspace_files: int = 10_000
    """Files, folders and links an episode's workspace may hold (its tmpfs's inode count; SWE-lite repositories
    have <100). The trusted side refuses a submission with more, unread; its grading copy has room for twice as
    many (the code under test may add files while it is graded)."""
    submission_mb: int = 64
    """Largest submission the trusted side reads or copies: the apparent size of its regular files together (a
    sparse file counts in full, since a copy fills its holes). A larger one is refused unread and graded 0."""
    patch_kb: int = 1024
    """Largest diff of a submission from its task's repository (``info["patch"]``, UTF-8); a submission whose
    diff would be larger is refused (graded 0) before the files that make it so are read."""
    grader_memory_mb: int = 2048
    """Memory of SWE-lite's trusted grading process (pytest and the hidden tests, outside the sandbox), which
    holds what the code under test sends back: a cgroup of its own caps it (with ``max_processes``; its wall time
    is `comprl.envs.swe.tasks.GRADING_TIMEOUT_S`), so an endless stream of answers ends the grading, failed,
    instead of filling the host's memory. With ``episode_limits=False``, its address space (RLIMIT_AS)."""
    episode_limits: bool = True
    """Enforce `memory_mb`, `max_processes` and `workspace_mb` with the kernel (cgroups and a tmpfs mount,
    which need root or a delegated cgroup; `SandboxUnavailable` says what is missing). False: per-process
    rlimits only and no disk quota, for machines where that is impossible; a hostile agent can then use
    several times `memory_mb` and fill the disk."""

    def __post_init__(self) -> None:
        names = (
            "timeout_s", "output_chars", "memory_mb", "file_size_mb", "max_processes", "tmp_size_mb", "workspace_mb",
            "workspace_files", "submission_mb", "patch_kb", "grader_memory_mb",
        )  # fmt: skip
        for name in names:
            if getattr(self, name) <= 0:
                raise ValueError(f"SandboxConfig.{name} must be > 0, got {getattr(self, name)}")


@dataclass(frozen=True)
class CommandResult:
    """What one sandboxed command did."""

    output: str
    """Combined stdout and stderr, decoded as UTF-8 (invalid bytes replaced), capped at `output_chars`."""
    exit_code: int | None
    """The command's exit status; negative for a signal; None when it was killed at the timeout."""
    timed_out: bool
    truncated: bool
    """True when output was dropped to respect the cap."""
    seconds: float
    out_of_memory: bool = False
    """True when the kernel killed a process of the command for going over `SandboxConfig.memory_mb`."""


def render_output(head: bytes, tail: bytes, dropped: int) -> str:
    """Decode a capped output: its head, a marker saying how much was dropped, and its tail."""
    text = head.decode("utf-8", errors="replace")
    if dropped:
        text += f"\n[... {dropped} bytes of output omitted ...]\n"
    return text + tail.decode("utf-8", errors="replace")


def cap_output(data: bytes, limit: int) -> tuple[str, bool]:
    """`data` decoded and cut to about `limit` characters as `Sandbox.run` cuts it; and whether it was cut."""
    keep = limit // 2
    if len(data) <= 2 * keep:
        return data.decode("utf-8", errors="replace"), False
    return render_output(data[:keep], data[-keep:], len(data) - 2 * keep), True


@lru_cache(maxsize=1)
def bwrap_path() -> str:
    """The ``bwrap`` executable, checked once to work here; else `SandboxUnavailable` saying what to do."""
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxUnavailable(
            "SWE-lite runs commands under bubblewrap, which is not installed: "
            "`apt-get install bubblewrap` (Debian/Ubuntu) or `dnf install bubblewrap` (Fedora)"
        )
    try:
        seccomp = _memory_file("comprl-seccomp", seccomp_program())
    except UnsupportedMachine as error:
        raise SandboxUnavailable(f"SWE-lite's sandbox has no seccomp filter for this machine: {error}") from error
    try:
        probe = subprocess.run(
            [found, *_HARDENING, "--seccomp", str(seccomp), "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
             "true"],
            capture_output=True,
            text=True,
            timeout=30,
            pass_fds=(seccomp,),
        )  # fmt: skip
    finally:
        os.close(seccomp)
    if probe.returncode != 0:
        raise SandboxUnavailable(
            f"bubblewrap cannot create an unprivileged sandbox on this machine ({probe.stderr.strip()}): it needs "
            "bubblewrap >= 0.8 (for --disable-userns) and user namespaces; inside a container, allow them (e.g. "
            "docker run --security-opt seccomp=unconfined) or run as root"
        )
    return found


@lru_cache(maxsize=1)
def seccomp_program() -> bytes:
    """The compiled seccomp filter for this machine (`comprl.envs.swe.seccomp`)."""
    return filter_program()


def _memory_file(name: str, data: bytes) -> int:
    """A descriptor of an in-memory file holding `data`, positioned at its start (how bwrap reads an FD option)."""
    descriptor = os.memfd_create(name)
    os.write(descriptor, data)
    os.lseek(descriptor, 0, os.SEEK_SET)
    return descriptor


def _python_roots() -> tuple[str, ...]:
    """Folders the sandbox must see for ``python`` and ``pytest`` to work: the venv and its base install."""
    roots = {sys.prefix, sys.base_prefix, str(Path(sys.executable).resolve().parent.parent)}
    return tuple(sorted(root for root in roots if not any(root.startswith(system) for system in _SYSTEM_DIRS)))


# ---- per-command and per-episode limits enforced by the kernel ----------------------------------------------

_CGROUP_LIMITS = {"memory": ("memory.limit_in_bytes", "memory.max"), "pids": ("pids.max", "pids.max")}
"""Controller -> its limit file in cgroup v1 and in cgroup v2."""


@lru_cache(maxsize=1)
def cgroup_parents() -> dict[str, tuple[Path, bool]]:
    """Controller (memory, pids) -> (this process's cgroup folder in the hierarchy that has it, whether it is
    cgroup v2); `SandboxUnavailable` when a controller is missing or its folder is not writable."""
    mounts: dict[str, tuple[str, str, bool]] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields, _, tail = line.partition(" - ")
        fstype, _source, options = (tail.split() + ["", ""])[:3]
        root, mountpoint = fields.split()[3:5]
        if fstype == "cgroup":
            for controller in options.split(","):
                mounts.setdefault(controller, (mountpoint, root, False))
        elif fstype == "cgroup2":
            mounts.setdefault("", (mountpoint, root, True))
    own = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            own[controller] = path
    parents = {}
    for controller in _CGROUP_LIMITS:
        key = controller if controller in mounts and controller in own else ""
        if key not in mounts or key not in own:
            raise SandboxUnavailable(f"no {controller} cgroup controller is mounted here")
        mountpoint, root, v2 = mounts[key]
        folder = Path(mountpoint) / os.path.relpath(own[key], root)
        if v2 and controller not in (folder / "cgroup.controllers").read_text().split():
            raise SandboxUnavailable(f"the {controller} controller is not enabled for cgroup {folder}")
        if not os.access(folder, os.W_OK):
            raise SandboxUnavailable(f"cannot create cgroups under {folder} (needs root or a delegated cgroup)")
        parents[controller] = (folder.resolve(), v2)
    return parents


_CGROUP_PREFIX = "comprl-sandbox"


class CommandCgroup:
    """A fresh cgroup holding one sandboxed command and everything it starts: memory and process limits for
    them all together, a reliable way to kill them all, and whether the kernel hit the memory limit."""

    def __init__(self, config: SandboxConfig) -> None:
        name = f"{_CGROUP_PREFIX}-{os.getpid()}-{time.monotonic_ns()}"
        self.folders: dict[Path, bool] = {}
        limits = {"memory": config.memory_mb * 2**20, "pids": config.max_processes}
        try:
            for controller, (parent, v2) in cgroup_parents().items():
                folder = parent / name
                if folder not in self.folders:
                    folder.mkdir()
                    self.folders[folder] = v2
                if v2 and controller == "memory" and (folder / "memory.swap.max").exists():
                    (folder / "memory.swap.max").write_text("0")
                (folder / _CGROUP_LIMITS[controller][v2]).write_text(str(limits[controller]))
        except OSError as error:
            self.remove()
            raise SandboxUnavailable(f"cannot set up a cgroup for the sandbox: {error}") from error

    def attach(self) -> None:
        """Move the calling process into the cgroup (run in the child before exec)."""
        for folder in self.folders:
            (folder / "cgroup.procs").write_text(str(os.getpid()))

    def kill(self) -> None:
        for folder in self.folders:
            _kill_cgroup(folder)

    def out_of_memory(self) -> bool:
        for folder, v2 in self.folders.items():
            events = folder / ("memory.events" if v2 else "memory.oom_control")
            if events.exists():
                counts = dict(line.split() for line in events.read_text().splitlines() if len(line.split()) == 2)
                if int(counts.get("oom_kill", 0)) > 0:
                    return True
        return False

    def remove(self) -> None:
        """Kill what is left and delete the cgroup."""
        for folder in list(self.folders):
            _remove_cgroup(folder)
            self.folders.pop(folder)


def _kill_cgroup(folder: Path) -> None:
    for pid in (folder / "cgroup.procs").read_text().split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


def _remove_cgroup(folder: Path) -> None:
    """Delete a cgroup and the cgroups below it, killing what runs in them and retrying while the kernel reaps
    the last processes."""
    for child in [path for path in folder.iterdir() if path.is_dir()] if folder.is_dir() else []:
        _remove_cgroup(child)
    for _ in range(200):
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            _kill_cgroup(folder)
            time.sleep(0.01)


_MOUNT_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
"""The environment of ``mount`` and ``umount`` (found where the system keeps them, not on the caller's PATH)."""


def mount_quota(folder: Path, size_mb: int, inodes: int) -> None:
    """Mount a tmpfs of `size_mb` and `inodes` on `folder`: what is written below it cannot exceed that size, nor
    hold more than that many files, folders and links together (the tmpfs's root is one of them)."""
    options = f"size={size_mb}m,nr_inodes={inodes},mode=0755,nosuid,nodev"
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "comprl-workspace", str(folder)],
        capture_output=True,
        text=True,
        env=_MOUNT_ENV,
    )
    if result.returncode != 0:
        raise SandboxUnavailable(
            f"cannot mount a size-limited tmpfs for the workspace ({result.stderr.strip() or result.returncode}); "
            "this needs root (CAP_SYS_ADMIN), or SandboxConfig(episode_limits=False) to run without a disk quota"
        )


def unmount_quota(folder: Path) -> None:
    """Undo `mount_quota` (lazily, so a process still holding a file there cannot block it)."""
    subprocess.run(["umount", "-l", str(folder)], capture_output=True, env=_MOUNT_ENV)


@lru_cache(maxsize=1)
def check_episode_limits() -> None:
    """`SandboxUnavailable` unless cgroups and tmpfs mounts work here (checked once)."""
    CommandCgroup(SandboxConfig()).remove()
    probe = Path(tempfile.mkdtemp(prefix="comprl-quota-probe-"))
    try:
        mount_quota(probe, 1, 16)
        unmount_quota(probe)
    finally:
        probe.rmdir()


class SandboxedProcess:
    """One process started in a `Sandbox` (or, with its `env`, the trusted grader), with its cgroup and rlimits;
    `kill` ends it and everything it started."""

    def __init__(self, arguments: list[str], config: SandboxConfig, env: dict[str, str] | None = None, **popen: Any):
        self.config = config
        self.cgroup = CommandCgroup(config) if config.episode_limits else None
        self.popen = subprocess.Popen(
            arguments, env=env or {}, start_new_session=True, preexec_fn=self._prepare, close_fds=True, **popen
        )

    def _prepare(self) -> None:
        """Runs in the child before exec: the cgroup and the rlimits that bwrap and the command inherit."""
        if self.cgroup is not None:
            self.cgroup.attach()
        megabyte = 2**20
        resource.setrlimit(resource.RLIMIT_FSIZE, (self.config.file_size_mb * megabyte,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if not self.config.episode_limits:
            resource.setrlimit(resource.RLIMIT_AS, (self.config.memory_mb * megabyte,) * 2)
            running = sum(name.isdigit() for name in os.listdir("/proc"))
            resource.setrlimit(resource.RLIMIT_NPROC, (running + self.config.max_processes,) * 2)

    def kill(self) -> int:
        """Kill the process tree; its exit status."""
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if self.cgroup is not None:
            self.cgroup.kill()
        return self.popen.wait()

    def close(self) -> bool:
        """Kill what is left, remove the cgroup; whether the memory limit was hit."""
        self.kill()
        if self.cgroup is None:
            return False
        out_of_memory = self.cgroup.out_of_memory()
        self.cgroup.remove()
        return out_of_memory


class Sandbox:
    """Runs shell commands with `workspace` mounted read-write at `WORKSPACE_MOUNT` (see the module docstring).
    `binds` are further host folders made visible at the same path, read-only (the grader's temporary files: the
    code may read them, but can neither write there nor plant links that the grader would follow)."""

    def __init__(
        self, workspace: str | os.PathLike[str], config: SandboxConfig | None = None, binds: tuple[Path, ...] = ()
    ) -> None:
        self.workspace = Path(workspace).resolve()
        if not self.workspace.is_dir():
            raise FileNotFoundError(f"sandbox workspace {self.workspace} is not a folder")
        self.config = config or SandboxConfig()
        self.binds = tuple(Path(folder).resolve() for folder in binds)
        self._bwrap = bwrap_path()
        if self.config.episode_limits:
            cgroup_parents()  # the cgroups each command needs; the workspace's tmpfs is its owner's concern

    def _options(self, seccomp: int) -> list[str]:
        """bwrap's options, with the seccomp filter read from descriptor `seccomp`."""
        arguments = [*_HARDENING, "--die-with-parent", "--new-session", "--clearenv", "--seccomp", str(seccomp)]
        for folder in _SYSTEM_DIRS:
            if Path(folder).is_symlink():
                arguments += ["--symlink", os.readlink(folder), folder]
            elif Path(folder).is_dir():
                arguments += ["--ro-bind", folder, folder]
        arguments += ["--proc", "/proc", "--dev", "/dev"]
        arguments += ["--size", str(self.config.tmp_size_mb * 2**20), "--tmpfs", "/tmp"]
        # After the tmpfs: an interpreter installed under /tmp (a venv in a temporary clone) stays visible.
        for path in (*_ETC_FILES, *_python_roots()):
            arguments += ["--ro-bind-try", path, path]
        for folder in self.binds:
            arguments += ["--ro-bind", str(folder), str(folder)]
        arguments += ["--bind", str(self.workspace), WORKSPACE_MOUNT, "--remount-ro", "/", "--chdir", WORKSPACE_MOUNT]
        path = ":".join((str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"))
        for name, value in (
            ("PATH", path),
            ("HOME", "/tmp"),
            ("LANG", "C.UTF-8"),
            ("PYTHONDONTWRITEBYTECODE", "1"),
            ("PYTHONUNBUFFERED", "1"),
        ):
            arguments += ["--setenv", name, value]
        return arguments

    def start(self, argv: list[str], **popen: Any) -> SandboxedProcess:
        """Start `argv` in the sandbox and return at once (`popen`: the pipes, as for `subprocess.Popen`). bwrap
        reads its options and the seccomp filter from in-memory files, so its command line holds only `argv`."""
        seccomp = _memory_file("comprl-seccomp", seccomp_program())
        listed = b"".join(f"{option}\0".encode() for option in self._options(seccomp))
        options = _memory_file("comprl-bwrap-options", listed)
        try:
            bwrap = [self._bwrap, "--args", str(options), *argv]
            return SandboxedProcess(bwrap, self.config, pass_fds=(seccomp, options), **popen)
        finally:
            os.close(options)
            os.close(seccomp)

    def run(self, command: str, timeout_s: float | None = None) -> CommandResult:
        """Run `command` with ``bash -c`` in the workspace; never raises for what the command does."""
        timeout = self.config.timeout_s if timeout_s is None else timeout_s
        started = time.perf_counter()
        process = self.start(
            ["/bin/bash", "-c", command], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        try:
            head, tail, dropped, timed_out = self._read(process.popen, started + timeout)
            exit_code = process.kill() if timed_out else process.popen.wait()
        finally:
            out_of_memory = process.close()
        return CommandResult(
            output=render_output(head, tail, dropped),
            exit_code=None if timed_out else exit_code,
            timed_out=timed_out,
            truncated=dropped > 0,
            seconds=time.perf_counter() - started,
            out_of_memory=out_of_memory,
        )

    def _read(self, process: subprocess.Popen, deadline: float) -> tuple[bytearray, bytearray, int, bool]:
        """Drain the output pipe until EOF or `deadline`, keeping a bounded head and tail."""
        keep = self.config.output_chars // 2
        head, tail, dropped = bytearray(), bytearray(), 0
        assert process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            while True:
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    return head, tail, dropped, True
                if not selector.select(timeout=remaining):
                    continue
                chunk = os.read(process.stdout.fileno(), 65536)
                if not chunk:
                    return head, tail, dropped, False
                room = keep - len(head)
                head += chunk[:room]
                tail += chunk[max(room, 0) :]
                if len(tail) > keep:
                    dropped += len(tail) - keep
                    del tail[: len(tail) - keep]
