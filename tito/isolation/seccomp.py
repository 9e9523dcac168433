"""The sandbox's seccomp filter: no kernel keyrings (`add_key`, `request_key`, `keyctl` fail with EPERM).

A keyring belongs to a uid, not to a process or its namespaces, and outlives the sandbox: as root every
test process of a notebook runs as that notebook's uid, so a key one graded cell adds (a hidden test's
inputs) would be readable by the next, visible, test. The filter is a classic BPF program that bubblewrap
loads (`bwrap --seccomp FD`) just before it runs the command, so everything in the sandbox inherits it and
nothing there can remove it (root inside included). It checks the architecture of each call first: a
64-bit x86 process can still make 32-bit calls (`int 0x80`, numbered as on i386) or x32 ones (bit 30 set),
so each architecture the kernel may report is matched with its own numbers, and a call reported under an
architecture the table does not know fails with ENOSYS. Every other call is allowed.

    >>> len(keyring_filter("x86_64")) % 8        # sock_filter instructions of 8 bytes each
    0
    >>> keyring_filter("sparc64") is None        # numbers unknown here: no filter (see KEYRING_CALLS)
    True
"""
from __future__ import annotations

import platform
import struct

# (AUDIT_ARCH_*, add_key, request_key, keyctl) per architecture the kernel reports for a machine's processes:
# <asm/unistd_64.h>, <asm/unistd_32.h> (i386, ARM EABI), asm-generic/unistd.h (aarch64)
X86_64, I386, AARCH64, ARM = 0xC000003E, 0x40000003, 0xC00000B7, 0x40000028
KEYRING_CALLS = {
    "x86_64": [(X86_64, (248, 249, 250)), (I386, (286, 287, 288))],
    "aarch64": [(AARCH64, (217, 218, 219)), (ARM, (309, 310, 311))],
}
KEYRING_CALLS["amd64"], KEYRING_CALLS["arm64"] = KEYRING_CALLS["x86_64"], KEYRING_CALLS["aarch64"]
X32_BIT = 0x40000000              # x32 calls arrive as AUDIT_ARCH_X86_64 with this bit set in the number
EPERM, ENOSYS = 1, 38
ALLOW, ERRNO = 0x7FFF0000, 0x00050000               # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | errno
LD, JEQ, AND, RET = 0x20, 0x15, 0x54, 0x06           # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_ALU|AND|K, BPF_RET|K
NR, ARCH = 0, 4                                      # offsets in struct seccomp_data


def program(machine: str) -> list[tuple[int, int, int, int]] | None:
    """The filter as (code, jump if true, jump if false, k) for `machine` (platform.machine()'s name);
    jumps count from the next instruction. None where the table has no numbers for `machine`.

    >>> program("x86_64")[:2]
    [(32, 0, 0, 4), (21, 0, 6, 3221225534)]
    """
    arches = KEYRING_CALLS.get(machine)
    if arches is None:
        return None
    blocks = []
    for arch, numbers in arches:
        body = [(LD, 0, 0, NR)]
        if arch == X86_64:
            body.append((AND, 0, 0, 0xFFFFFFFF ^ X32_BIT))     # x32's numbers are x86_64's plus the bit
        body += [(JEQ, 0, 0, n) for n in numbers] + [(RET, 0, 0, ALLOW)]
        blocks.append((arch, body))
    out = [(LD, 0, 0, ARCH)]
    size = 1 + sum(1 + len(body) for _, body in blocks) + 2   # the arch load, the blocks, the two returns
    for arch, body in blocks:
        out.append((JEQ, 0, len(body), arch))                  # not this architecture: the next block
        for code, jt, jf, k in body:
            if code == JEQ:   # a keyring call: to the EPERM return, the program's last instruction
                jt = size - len(out) - 2
            out.append((code, jt, jf, k))
    out += [(RET, 0, 0, ERRNO | ENOSYS),                        # an architecture not in the table
            (RET, 0, 0, ERRNO | EPERM)]
    if len(out) != size or not all(0 <= j < 256 for _, jt, jf, _ in out for j in (jt, jf)):
        raise RuntimeError(f"seccomp filter for {machine}: jumps out of range ({out})")  # a table too long
    return out


def keyring_filter(machine: str | None = None) -> bytes | None:
    """The compiled filter (struct sock_filter[], native byte order) for `machine` (default: this one), as
    `bwrap --seccomp FD` reads it; None where the keyring calls' numbers are not known for it."""
    ins = program(machine or platform.machine())
    return None if ins is None else b"".join(struct.pack("=HBBI", *i) for i in ins)
