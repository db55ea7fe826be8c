"""The seccomp profile of node-mode containers: an allowlist of what a run and bubblewrap need.

Docker's default profile refuses ``unshare``, ``mount`` and namespace flags of ``clone`` to a
container without ``CAP_SYS_ADMIN``, so bubblewrap cannot make a run's namespaces in it. This
profile allows exactly those on top of the ordinary system calls of programs (interpreters,
compilers, test runners) and nothing else: no ``setns`` (no joining other namespaces), no
``keyctl``/``add_key``, ``bpf``, ``perf_event_open``, ``ptrace``, ``process_vm_*``, ``io_uring``,
module, clock, swap, reboot or accounting calls, no ``open_by_handle_at``. Of the new mount API
only ``open_tree`` and ``move_mount`` (:data:`HANDOVER_CALLS`): a warm node hands a run's folders
to its candidate with them; like ``mount``, both need ``CAP_SYS_ADMIN`` over the mount namespace,
which a process has only in the user namespaces bubblewrap or the warm node made for its run (no
``fsopen``, ``fsmount``, ``fspick``, ``fsconfig`` or ``mount_setattr``).
Everything else fails with EPERM. The container itself still has every capability dropped and
``no-new-privileges``; the namespaces bubblewrap makes are user-owned (uid 1000 outside).
"""

from __future__ import annotations

import functools
import json
import platform

#: What bubblewrap needs beyond ordinary programs: new namespaces and its private mounts.
BWRAP_CALLS = ("unshare", "clone", "clone3", "mount", "umount2", "pivot_root", "chroot",
               "sethostname", "setdomainname")

#: A warm node's hand-over of a run's folders to its candidate child (detached copies made in the
#: run's namespaces, attached in the candidate's: harness/warm/docker_node_candidate.py).
HANDOVER_CALLS = ("open_tree", "move_mount")

#: Ordinary programs (names of several architectures; unknown ones are skipped by the runtime).
PROGRAM_CALLS = (
    "accept", "accept4", "access", "alarm", "arch_prctl", "bind", "brk", "capget", "capset",
    "chdir", "chmod", "chown", "chown32", "clock_getres", "clock_getres_time64",
    "clock_gettime", "clock_gettime64", "clock_nanosleep", "clock_nanosleep_time64", "close",
    "close_range", "connect", "copy_file_range", "creat", "dup", "dup2", "dup3",
    "epoll_create", "epoll_create1", "epoll_ctl", "epoll_pwait", "epoll_pwait2", "epoll_wait",
    "eventfd", "eventfd2", "execve", "execveat", "exit", "exit_group", "faccessat",
    "faccessat2", "fadvise64", "fadvise64_64", "fallocate", "fchdir", "fchmod", "fchmodat",
    "fchmodat2", "fchown", "fchown32", "fchownat", "fcntl", "fcntl64", "fdatasync",
    "fgetxattr", "flistxattr", "flock", "fork", "fremovexattr", "fsetxattr", "fstat",
    "fstat64", "fstatat64", "fstatfs", "fstatfs64", "fsync", "ftruncate", "ftruncate64",
    "futex", "futex_time64", "futex_waitv", "futimesat", "get_mempolicy", "get_robust_list",
    "get_thread_area", "getcpu", "getcwd", "getdents", "getdents64", "getegid", "getegid32",
    "geteuid", "geteuid32", "getgid", "getgid32", "getgroups", "getgroups32", "getitimer",
    "getpeername", "getpgid", "getpgrp", "getpid", "getppid", "getpriority", "getrandom",
    "getresgid", "getresgid32", "getresuid", "getresuid32", "getrlimit", "getrusage", "getsid",
    "getsockname", "getsockopt", "gettid", "gettimeofday", "getuid", "getuid32", "getxattr",
    "inotify_add_watch", "inotify_init", "inotify_init1", "inotify_rm_watch", "io_cancel",
    "io_destroy", "io_getevents", "io_pgetevents", "io_pgetevents_time64", "io_setup",
    "io_submit", "ioctl", "ioprio_get", "ioprio_set", "ipc", "kill", "landlock_add_rule",
    "landlock_create_ruleset", "landlock_restrict_self", "lchown", "lchown32", "lgetxattr",
    "link", "linkat", "listen", "listxattr", "llistxattr", "_llseek", "lremovexattr", "lseek",
    "lsetxattr", "lstat", "lstat64", "madvise", "mbind", "membarrier", "memfd_create",
    "mincore", "mkdir", "mkdirat", "mknod", "mknodat", "mlock", "mlock2", "mlockall", "mmap",
    "mmap2", "mprotect", "mq_getsetattr", "mq_notify", "mq_open", "mq_timedreceive",
    "mq_timedreceive_time64", "mq_timedsend", "mq_timedsend_time64", "mq_unlink", "mremap",
    "msgctl", "msgget", "msgrcv", "msgsnd", "msync", "munlock", "munlockall", "munmap",
    "nanosleep", "newfstatat", "_newselect", "open", "openat", "openat2", "pause",
    "personality", "pidfd_open", "pidfd_send_signal", "pipe", "pipe2", "pkey_alloc",
    "pkey_free", "pkey_mprotect", "poll", "ppoll", "ppoll_time64", "prctl", "pread64",
    "preadv", "preadv2", "prlimit64", "pselect6", "pselect6_time64", "pwrite64", "pwritev",
    "pwritev2", "read", "readahead", "readlink", "readlinkat", "readv", "recv", "recvfrom",
    "recvmmsg", "recvmmsg_time64", "recvmsg", "remap_file_pages", "removexattr", "rename",
    "renameat", "renameat2", "restart_syscall", "rmdir", "rseq", "rt_sigaction",
    "rt_sigpending", "rt_sigprocmask", "rt_sigqueueinfo", "rt_sigreturn", "rt_sigsuspend",
    "rt_sigtimedwait", "rt_sigtimedwait_time64", "rt_tgsigqueueinfo", "sched_get_priority_max",
    "sched_get_priority_min", "sched_getaffinity", "sched_getattr", "sched_getparam",
    "sched_getscheduler", "sched_rr_get_interval", "sched_rr_get_interval_time64",
    "sched_setaffinity", "sched_setattr", "sched_setparam", "sched_setscheduler",
    "sched_yield", "seccomp", "select", "semctl", "semget", "semop", "semtimedop",
    "semtimedop_time64", "send", "sendfile", "sendfile64", "sendmmsg", "sendmsg", "sendto",
    "set_mempolicy", "set_robust_list", "set_thread_area", "set_tid_address", "setfsgid",
    "setfsgid32", "setfsuid", "setfsuid32", "setgid", "setgid32", "setgroups", "setgroups32",
    "setitimer", "setpgid", "setpriority", "setregid", "setregid32", "setresgid",
    "setresgid32", "setresuid", "setresuid32", "setreuid", "setreuid32", "setrlimit", "setsid",
    "setsockopt", "setuid", "setuid32", "setxattr", "shmat", "shmctl", "shmdt", "shmget",
    "shutdown", "sigaltstack", "signalfd", "signalfd4", "sigprocmask", "sigreturn", "socket",
    "socketcall", "socketpair", "splice", "stat", "stat64", "statfs", "statfs64", "statx",
    "symlink", "symlinkat", "sync", "sync_file_range", "syncfs", "sysinfo", "tee", "tgkill",
    "time", "timer_create", "timer_delete", "timer_getoverrun", "timer_gettime",
    "timer_gettime64", "timer_settime", "timer_settime64", "timerfd_create", "timerfd_gettime",
    "timerfd_gettime64", "timerfd_settime", "timerfd_settime64", "times", "tkill", "truncate",
    "truncate64", "ugetrlimit", "umask", "uname", "unlink", "unlinkat", "utime", "utimensat",
    "utimensat_time64", "utimes", "vfork", "vmsplice", "wait4", "waitid", "waitpid", "write",
    "writev",
)

_ARCHES = {
    "x86_64": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
    "aarch64": ["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
}


@functools.lru_cache(maxsize=1)
def node_profile() -> str:
    """The profile as the JSON text Docker's ``security_opt=["seccomp=..."]`` takes."""
    profile: dict[str, object] = {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": 1,  # EPERM
        "syscalls": [{"names": sorted({*PROGRAM_CALLS, *BWRAP_CALLS, *HANDOVER_CALLS}),
                      "action": "SCMP_ACT_ALLOW"}],
    }
    arches = _ARCHES.get(platform.machine())
    if arches:
        profile["architectures"] = arches
    return json.dumps(profile, separators=(",", ":"))


__all__ = ["BWRAP_CALLS", "HANDOVER_CALLS", "PROGRAM_CALLS", "node_profile"]
