"""The first code a render child runs: bound it, take it off the network, then become the tool.

Never imported: `fleet.engine.render.tools.run_tool` runs it as
`python -I -S launch.py MEMORY FILE_SIZE NETWORK TOOL ARGS...`, so it uses the standard library
only. Limits are set here rather than in a `preexec_fn`, which is unsafe in a process with
threads (a worker is one); the process then replaces itself with the tool (same pid, so the
parent's timeout and kill still reach it).

- RLIMIT_DATA = MEMORY: the private writable memory the tool may map, which is what heap use
  is (Linux counts it since 4.7). RLIMIT_AS would count address space a Go program only
  reserves: kubectl and helm reserve ~750 MB at start and would need an AS limit far above what
  they use; under a 1 GiB AS limit they have ~250 MB left.
- RLIMIT_FSIZE = FILE_SIZE: no file the tool writes (helm packs dependencies) grows past it.
- RLIMIT_CORE = 0: a crash writes no core dump of the tool's memory.
- NETWORK `off`: new user and network namespaces, in which the only interface is a loopback
  that is down, so nothing the tool reads can make it connect anywhere. Where the kernel
  refuses unprivileged namespaces (some container runtimes), the tool runs on the network and
  the checks in `kustomize` and `helm` that refuse remote references are the only guard.
"""

import ctypes
import os
import resource
import sys

CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000


def offline() -> bool:
    """Enter a user namespace mapping only our own ids, and an empty network namespace."""
    uid, gid = os.getuid(), os.getgid()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
        return False
    maps = (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1"))
    for name, text in maps:
        with open(f"/proc/self/{name}", "w") as handle:
            handle.write(text)
    return True


def main(argv: list[str]) -> None:
    memory, file_size, network, command = int(argv[1]), int(argv[2]), argv[3], argv[4:]
    if network == "off":
        offline()
    resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv)
