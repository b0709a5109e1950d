"""The seccomp filter of every sandboxed command: system calls that an agent fixing a Python repository never
needs fail with EPERM.

Dropped capabilities already stop most of them; the filter also stops those an unprivileged process may make,
each of which reaches what the sandbox means to keep out: the kernel's larger attack surfaces (io_uring, bpf,
perf events, userfaultfd, keyrings), other processes of the same command (ptrace, process_vm_readv, pidfd_getfd,
kcmp), and mounts and namespaces (the mount calls old and new, unshare, setns). bubblewrap loads the program
(``--seccomp FD``) just before it starts the command, so it holds for the command and everything it starts.

The program is classic BPF over ``struct seccomp_data``: a call from another architecture's ABI (32-bit x86 on
an x86_64 kernel) kills the process, x32 calls are denied, a listed call fails with EPERM, anything else runs.
"""

from __future__ import annotations

import errno
import platform
import struct

DENIED = (
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "process_madvise", "kcmp",
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "mount", "umount2", "pivot_root", "move_mount", "open_tree", "open_tree_attr", "fsopen", "fsconfig", "fsmount",
    "fspick", "mount_setattr", "statmount", "listmount", "unshare", "setns",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "swapon", "swapoff", "reboot", "acct", "quotactl", "quotactl_fd",
    "name_to_handle_at", "open_by_handle_at", "lookup_dcookie", "syslog",
)  # fmt: skip
"""The system calls the filter denies (``personality``, which some programs call at start, is allowed)."""

_SYSCALLS = {
    "x86_64": (0xC000003E, {
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "ptrace": 101,
        "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438, "process_madvise": 440, "kcmp": 312,
        "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "keyctl": 250, "add_key": 248, "request_key": 249,
        "mount": 165, "umount2": 166, "pivot_root": 155, "move_mount": 429, "open_tree": 428, "open_tree_attr": 467,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "statmount": 457,
        "listmount": 458, "unshare": 272, "setns": 308, "kexec_load": 246, "kexec_file_load": 320,
        "init_module": 175, "finit_module": 313, "delete_module": 176, "swapon": 167, "swapoff": 168,
        "reboot": 169, "acct": 163, "quotactl": 179, "quotactl_fd": 443, "name_to_handle_at": 303,
        "open_by_handle_at": 304, "lookup_dcookie": 212, "syslog": 103,
    }),
    "aarch64": (0xC00000B7, {
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "ptrace": 117,
        "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438, "process_madvise": 440, "kcmp": 272,
        "bpf": 280, "perf_event_open": 241, "userfaultfd": 282, "keyctl": 219, "add_key": 217, "request_key": 218,
        "mount": 40, "umount2": 39, "pivot_root": 41, "move_mount": 429, "open_tree": 428, "open_tree_attr": 467,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "statmount": 457,
        "listmount": 458, "unshare": 97, "setns": 268, "kexec_load": 104, "kexec_file_load": 294,
        "init_module": 105, "finit_module": 273, "delete_module": 106, "swapon": 224, "swapoff": 225,
        "reboot": 142, "acct": 89, "quotactl": 60, "quotactl_fd": 443, "name_to_handle_at": 264,
        "open_by_handle_at": 265, "lookup_dcookie": 18, "syslog": 116,
    }),
}  # fmt: skip
"""Machine -> (its AUDIT_ARCH_* value, the number of each denied call), from the kernel's syscall tables."""
_X32_BIT = 0x40000000
"""x86_64 calls at or above this number use the x32 ABI."""

_LOAD_WORD, _JUMP_IF_EQUAL, _JUMP_IF_AT_LEAST, _RETURN = 0x20, 0x15, 0x35, 0x06
"""BPF_LD|BPF_W|BPF_ABS, BPF_JMP|BPF_JEQ|BPF_K, BPF_JMP|BPF_JGE|BPF_K, BPF_RET|BPF_K."""
_NR_OFFSET, _ARCH_OFFSET = 0, 4
"""Where ``struct seccomp_data`` holds the call's number and its architecture."""
_ALLOW, _KILL_PROCESS, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000


class UnsupportedMachine(RuntimeError):
    """No syscall table for this machine's architecture."""


def _instruction(code: int, k: int, jump_true: int = 0, jump_false: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jump_true, jump_false, k)  # struct sock_filter


def filter_program(machine: str | None = None) -> bytes:
    """The compiled filter for `machine` (default: this one), as bwrap's ``--seccomp`` reads it."""
    machine = machine or platform.machine()
    if machine not in _SYSCALLS:
        raise UnsupportedMachine(f"no seccomp syscall table for {machine}; supported: {', '.join(_SYSCALLS)}")
    arch, numbers = _SYSCALLS[machine]
    denied = sorted({numbers[name] for name in DENIED})
    checks = [(_JUMP_IF_AT_LEAST, _X32_BIT)] if machine == "x86_64" else []
    checks += [(_JUMP_IF_EQUAL, number) for number in denied]
    program = [
        _instruction(_LOAD_WORD, _ARCH_OFFSET),
        _instruction(_JUMP_IF_EQUAL, arch, 1, 0),
        _instruction(_RETURN, _KILL_PROCESS),
        _instruction(_LOAD_WORD, _NR_OFFSET),
    ]
    for index, (code, number) in enumerate(checks):
        program.append(_instruction(code, number, len(checks) - index, 0))  # true: over the rest and ALLOW to DENY
    program += [_instruction(_RETURN, _ALLOW), _instruction(_RETURN, _ERRNO | errno.EPERM)]
    return b"".join(program)
