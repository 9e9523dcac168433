"""The sandbox's seccomp filters: no kernel keyrings (`add_key`, `request_key`, `keyctl` fail with EPERM).

A keyring belongs to a uid, not to a process or its namespaces, and outlives the sandbox: as root every
test process of a notebook runs as that notebook's uid, so a key one graded cell adds (a hidden test's
inputs) would be readable by the next, visible, test. The filter is a classic BPF program that bubblewrap
loads (`bwrap --seccomp FD`) just before it runs the command, so everything in the sandbox inherits it and
nothing there can remove it (root inside included). It checks the architecture of each call first: a
64-bit x86 process can still make 32-bit calls (`int 0x80`, numbered as on i386) or x32 ones (bit 30 set),
so each architecture the kernel may report is matched with its own numbers, and a call reported under an
architecture the table does not know fails with ENOSYS. Every other call is allowed.

A second rule set, STUDENT (red team 49), keeps a student's code from making a user namespace (every capability
inside it: the kernel's namespaced code as attack surface) and from `clone(CLONE_PARENT)` (a process outside
its parent's tree, which no sweep finds); `clone3`, whose flags a classic filter cannot read, gets ENOSYS so the
C library falls back to `clone`. bwrap loads it with the keyrings' rules where the sandbox's code makes no
namespaces (`sandbox_filter`); the grading host, which does make them for each notebook process, loads it in each
such process once they are made (`student_filter`, `install`: filters stack, the strictest answer wins).

    >>> len(keyring_filter("x86_64")) % 8        # sock_filter instructions of 8 bytes each
    0
    >>> keyring_filter("sparc64") is None        # numbers unknown here: no filter (see CALLS)
    True
"""
from __future__ import annotations

import os
import platform
import struct

# per architecture the kernel reports for a machine's processes, the numbers of the calls the filters name:
# <asm/unistd_64.h>, <asm/unistd_32.h> (i386, ARM EABI), asm-generic/unistd.h (aarch64)
X86_64, I386, AARCH64, ARM = 0xC000003E, 0x40000003, 0xC00000B7, 0x40000028
CALLS = {
    "x86_64": [(X86_64, dict(add_key=248, request_key=249, keyctl=250, clone=56, unshare=272, clone3=435)),
               (I386, dict(add_key=286, request_key=287, keyctl=288, clone=120, unshare=310, clone3=435))],
    "aarch64": [(AARCH64, dict(add_key=217, request_key=218, keyctl=219, clone=220, unshare=97, clone3=435)),
                (ARM, dict(add_key=309, request_key=310, keyctl=311, clone=120, unshare=337, clone3=435))],
}
CALLS["amd64"], CALLS["arm64"] = CALLS["x86_64"], CALLS["aarch64"]
X32_BIT = 0x40000000              # x32 calls arrive as AUDIT_ARCH_X86_64 with this bit set in the number
EPERM, ENOSYS = 1, 38
CLONE_PARENT, CLONE_NEWUSER = 0x00008000, 0x10000000
ALLOW, ERRNO = 0x7FFF0000, 0x00050000               # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | errno
LD, JEQ, JSET, AND, RET = 0x20, 0x15, 0x45, 0x54, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_JMP|JSET|K, BPF_ALU|AND|K, BPF_RET|K
NR, ARCH, ARG0 = 0, 4, 16                            # offsets in struct seccomp_data (ARG0: the low word, little-endian)

# rules: call -> errno (the call fails with it), or (mask, errno): it fails when its first argument (flags) has a
# bit of mask
KEYRINGS = {"add_key": EPERM, "request_key": EPERM, "keyctl": EPERM}
# what a student's process may not do (red team 49): a user namespace of its own (unshare or clone: every
# capability there, the kernel's namespaced code as attack surface), a process whose parent is its parent's
# parent (clone(CLONE_PARENT): it would escape the sweep of what a call or cell started); clone3 passes its
# flags in memory a filter cannot read, so it reports ENOSYS and the C library falls back to clone
STUDENT = {"clone": (CLONE_NEWUSER | CLONE_PARENT, EPERM), "unshare": (CLONE_NEWUSER | CLONE_PARENT, EPERM),
           "clone3": ENOSYS}


def program(machine: str, rules: dict | None = None) -> list[tuple[int, int, int, int]] | None:
    """The filter applying `rules` (default KEYRINGS) as (code, jump if true, jump if false, k) for `machine`
    (platform.machine()'s name); jumps count from the next instruction. A call under an architecture the table
    lacks gets ENOSYS. None where the table has no numbers for `machine`.

    >>> program("x86_64")[:2]
    [(32, 0, 0, 4), (21, 0, 6, 3221225534)]
    """
    arches = CALLS.get(machine)
    if arches is None:
        return None
    rules = KEYRINGS if rules is None else rules
    code: list[list] = []   # jumps may name a label, resolved below
    labels: dict[str, int] = {}
    for i, (arch, numbers) in enumerate(arches):
        if i == 0:
            code.append([LD, 0, 0, ARCH])
        labels[f"arch{i}"] = len(code)
        code.append([JEQ, 0, f"arch{i + 1}", arch])            # not this architecture: the next block
        code.append([LD, 0, 0, NR])
        if arch == X86_64:
            code.append([AND, 0, 0, 0xFFFFFFFF ^ X32_BIT])      # x32's numbers are x86_64's plus the bit
        for name, action in rules.items():
            code.append([JEQ, f"{name}{i}" if isinstance(action, tuple) else f"errno{action}", 0, numbers[name]])
        code.append([RET, 0, 0, ALLOW])
        for name, action in rules.items():
            if isinstance(action, tuple):                       # the call's flags decide
                labels[f"{name}{i}"] = len(code)
                code += [[LD, 0, 0, ARG0], [JSET, f"errno{action[1]}", 0, action[0]], [RET, 0, 0, ALLOW]]
    labels[f"arch{len(arches)}"] = labels[f"errno{ENOSYS}"] = len(code)
    code.append([RET, 0, 0, ERRNO | ENOSYS])                    # an architecture not in the table
    for errno in sorted({a[1] if isinstance(a, tuple) else a for a in rules.values()} - {ENOSYS}):
        labels[f"errno{errno}"] = len(code)
        code.append([RET, 0, 0, ERRNO | errno])
    out = []
    for pc, (op, jt, jf, k) in enumerate(code):
        jt, jf = (labels[j] - pc - 1 if isinstance(j, str) else j for j in (jt, jf))
        out.append((op, jt, jf, k))
    if not all(0 <= j < 256 for _, jt, jf, _ in out for j in (jt, jf)):
        raise RuntimeError(f"seccomp filter for {machine}: jumps out of range ({out})")  # a table too long
    return out


def compiled(machine: str | None = None, rules: dict | None = None) -> bytes | None:
    """The filter of `rules` compiled (struct sock_filter[], native byte order) for `machine` (default: this
    one); None where the calls' numbers are not known for it."""
    ins = program(machine or platform.machine(), rules)
    return None if ins is None else b"".join(struct.pack("=HBBI", *i) for i in ins)


def keyring_filter(machine: str | None = None) -> bytes | None:
    """The compiled keyrings filter for `machine` (default: this one), as `bwrap --seccomp FD` reads it; None
    where the keyring calls' numbers are not known for it."""
    return compiled(machine, KEYRINGS)


def sandbox_filter(namespaces: bool, machine: str | None = None) -> bytes | None:
    """What bwrap loads for a sandbox: the keyrings filter, plus STUDENT's rules unless the sandbox's own code
    makes namespaces (`namespaces`: the grading zygote, whose processes each load `student_filter` themselves
    once theirs are made). Example: len(sandbox_filter(False, "x86_64")) > len(sandbox_filter(True, "x86_64"))."""
    return compiled(machine, KEYRINGS if namespaces else {**KEYRINGS, **STUDENT})


def student_filter(machine: str | None = None) -> bytes | None:
    """STUDENT's rules alone (compiled): what each process that runs a student's code loads over bwrap's."""
    return compiled(machine, STUDENT)


def install(filt: bytes) -> None:
    """Load the compiled filter `filt` into this process (one thread: the zygote's forked child), over any it
    has; everything it starts inherits it, and nothing can remove it. Sets no_new_privs (required without
    CAP_SYS_ADMIN). OSError when the kernel refuses."""
    import ctypes

    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    c = ctypes.CDLL(None, use_errno=True)
    buf = ctypes.create_string_buffer(filt, len(filt))
    prog = Fprog(len(filt) // 8, ctypes.addressof(buf))
    if c.prctl(38, 1, 0, 0, 0) != 0 or c.prctl(22, 2, ctypes.byref(prog), 0, 0) != 0:  # NO_NEW_PRIVS; SECCOMP FILTER
        err = ctypes.get_errno()
        raise OSError(err, f"loading the seccomp filter: {os.strerror(err)}")
