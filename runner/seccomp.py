"""The seccomp filter of every sandboxed command: kernel surface a compile or a CUDA program never needs, refused.

bubblewrap loads it (`--seccomp FD`) just before it executes the launcher, so
every process of the command runs under it (with no_new_privs: it cannot be
lifted). The program is classic BPF, built here with `struct` (no native
dependency):

1. the architecture must be this machine's (x86_64 or aarch64): a 32-bit
   system call (`int 0x80`, arch i386), whose numbers mean other calls, kills
   the process; on x86_64 the x32 ABI (numbers with bit 30 set) is refused;
2. the calls in REFUSED_CALLS fail with EPERM: new namespaces and mounts
   (unshare, setns, mount, the new mount API, pivot_root, chroot), keyrings,
   ptrace and process_vm_*, io_uring, bpf, perf_event_open, modules and kexec,
   userfaultfd, file handles, swap, reboot, clock setting, and friends;
3. clone with a namespace flag fails with EPERM; clone3 (whose flags sit in
   memory, out of a filter's reach) fails with ENOSYS, so that the C library
   falls back to clone;
4. everything else is allowed (ioctl, mmap and the rest of what the NVIDIA
   driver and the toolchain use).

Standard library only, no I/O at import.
"""

from __future__ import annotations

import os
import platform
import struct

AUDIT_ARCH_X86_64 = 0xC000003E
AUDIT_ARCH_AARCH64 = 0xC00000B7
X32_SYSCALL_BIT = 0x40000000

_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K

SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
EPERM = 1
ENOSYS = 38

_NR_OFFSET = 0  # struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
_ARCH_OFFSET = 4
_ARG0_LOW_OFFSET = 16  # little-endian: the low 32 bits of args[0]

CLONE_NAMESPACE_FLAGS = 0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
"""CLONE_NEWTIME, NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET."""

REFUSED_CALLS = (
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr", "keyctl", "add_key", "request_key", "ptrace", "process_vm_readv",
    "process_vm_writev", "io_uring_setup", "io_uring_enter", "io_uring_register", "bpf", "perf_event_open",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "userfaultfd",
    "open_by_handle_at", "name_to_handle_at", "swapon", "swapoff", "reboot", "acct", "quotactl", "quotactl_fd",
    "lookup_dcookie", "syslog", "vhangup", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "kcmp",
    "fanotify_init", "iopl", "ioperm", "uselib", "_sysctl", "nfsservctl",
)  # fmt: skip
"""System calls that fail with EPERM inside the sandbox (those an architecture lacks are left out)."""

SYSCALLS: dict[str, dict[str, int]] = {
    "x86_64": {
        "unshare": 272, "setns": 308, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161, "keyctl": 250,
        "add_key": 248, "request_key": 249, "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "bpf": 321, "perf_event_open": 298,
        "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
        "userfaultfd": 323, "open_by_handle_at": 304, "name_to_handle_at": 303, "open_tree": 428, "move_mount": 429,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "swapon": 167,
        "swapoff": 168, "reboot": 169, "acct": 163, "quotactl": 179, "quotactl_fd": 443, "lookup_dcookie": 212,
        "syslog": 103, "vhangup": 153, "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305,
        "adjtimex": 159, "kcmp": 312, "fanotify_init": 300, "iopl": 172, "ioperm": 173, "uselib": 134,
        "_sysctl": 156, "nfsservctl": 180, "clone": 56, "clone3": 435,
    },
    "aarch64": {
        "unshare": 97, "setns": 268, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51, "keyctl": 219,
        "add_key": 217, "request_key": 218, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "bpf": 280, "perf_event_open": 241,
        "kexec_load": 104, "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106,
        "userfaultfd": 282, "open_by_handle_at": 265, "name_to_handle_at": 264, "open_tree": 428, "move_mount": 429,
        "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "swapon": 224,
        "swapoff": 225, "reboot": 142, "acct": 89, "quotactl": 60, "quotactl_fd": 443, "lookup_dcookie": 18,
        "syslog": 116, "vhangup": 58, "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266,
        "adjtimex": 171, "kcmp": 272, "fanotify_init": 262, "nfsservctl": 42, "clone": 220, "clone3": 435,
    },
}  # fmt: skip
"""System call numbers (from the kernel's unistd_64.h and asm-generic/unistd.h)."""

AUDIT_ARCH = {"x86_64": AUDIT_ARCH_X86_64, "aarch64": AUDIT_ARCH_AARCH64}


class SeccompUnsupported(RuntimeError):
    """No filter is known for this machine's architecture."""


def machine() -> str:
    """This machine's architecture as SYSCALLS names it."""
    arch = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def build_filter(arch: str | None = None) -> bytes:
    """The BPF program (struct sock_filter[]) for `arch` (default: this machine's)."""
    arch = arch or machine()
    if arch not in SYSCALLS:
        raise SeccompUnsupported(f"no seccomp filter for the {arch} architecture (known: {', '.join(SYSCALLS)})")
    table = SYSCALLS[arch]
    refused = [table[name] for name in REFUSED_CALLS if name in table]
    # Instructions as (code, k, target-if-true, target-if-false); targets are labels resolved below.
    body: list[tuple[int, int, str | int, str | int]] = [
        (_LD_W_ABS, _ARCH_OFFSET, 0, 0),
        (_JEQ_K, AUDIT_ARCH[arch], "next", "kill"),
        (_LD_W_ABS, _NR_OFFSET, 0, 0),
    ]
    if arch == "x86_64":
        body.append((_JGE_K, X32_SYSCALL_BIT, "eperm", "next"))
    for nr in refused:
        body.append((_JEQ_K, nr, "eperm", "next"))
    body.append((_JEQ_K, table["clone3"], "enosys", "next"))
    body.append((_JEQ_K, table["clone"], "next", "allow"))
    body.append((_LD_W_ABS, _ARG0_LOW_OFFSET, 0, 0))
    body.append((_JSET_K, CLONE_NAMESPACE_FLAGS, "eperm", "allow"))
    tail = {
        "allow": SECCOMP_RET_ALLOW,
        "eperm": SECCOMP_RET_ERRNO | EPERM,
        "enosys": SECCOMP_RET_ERRNO | ENOSYS,
        "kill": SECCOMP_RET_KILL_PROCESS,
    }
    where = {label: len(body) + i for i, label in enumerate(tail)}
    program = bytearray()
    for i, (code, k, jt, jf) in enumerate(body):
        if code in (_JEQ_K, _JGE_K, _JSET_K):
            offsets = [0 if t == "next" else where[str(t)] - (i + 1) for t in (jt, jf)]
            if max(offsets) > 255:
                raise SeccompUnsupported("the filter's jumps do not fit in 8 bits")
            program += _insn(code, k, offsets[0], offsets[1])
        else:
            program += _insn(code, k)
    for value in tail.values():
        program += _insn(_RET_K, value)
    return bytes(program)


_cached: dict[str, bytes] = {}


def filter_fd() -> int:
    """A fresh descriptor (memfd, offset 0) holding this machine's filter, for one `bwrap --seccomp FD`; the caller
    closes it once bubblewrap has started (bubblewrap reads it before it executes the command)."""
    arch = machine()
    if arch not in _cached:
        _cached[arch] = build_filter(arch)
    fd = os.memfd_create("kernelwiki-seccomp", os.MFD_CLOEXEC)
    os.write(fd, _cached[arch])
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
