"""The work folder unpacked in-process in a warm docker node's run, as GNU tar lays it out.

A warm node's run (``docker_node_warm``) unpacks the work folder the host sends as a tar stream.
``tar -x`` (GNU tar 1.34, as a user other than root: no ``--same-owner``, the umask applied) is
the reference: the cold node run uses it, and its complaints are what a run that cannot be
unpacked reports. Spawning it costs a run about 2 ms of CPU (its exec, its dynamic loading, a
feeder thread), a tenth of a warm ``calls`` run on docker. :func:`unpack` does the same work
in the run's own process for the archives that need no judgement, by the same steps tar takes,
so that the kernel leaves the same folder behind:

- each regular file created with ``O_EXCL`` and the archive's permission bits (the umask
  applied by the kernel, as tar's ``open``), written, then its times set on the open file:
  access time the unpack's start (tar's ``start_time``), modification time the archive's, to
  the nanosecond of its PAX record;
- each directory made with ``u+wx`` added, its final mode (the umask applied) and times set
  later, when the unpack first reaches a member outside it (tar's delayed set-stat: a
  directory's own time is set before the files that come after it in the archive are made in
  it, which then change it, as they do under tar), the rest at the end, most recent first.

Anything else goes to tar (:func:`unpack` returns False, leaving ``into`` empty): a member that is
not a regular file or a directory (links, devices, sparse files), a name that is not plain ASCII
or not a clean relative path, a member whose folder the archive has not made first, a duplicate,
a permission bit beyond ``0o777``, a directory without ``u+wx``, a PAX record other than path,
size, times, owner and group names, a time that is not a plain non-negative decimal, a file over
the run's file-size limit, an ``into`` that is not empty, a process running as root, and any
error while writing (a full tmpfs): the partial folder is removed first, so tar starts from the
same empty folder and gives its own message.
"""

from __future__ import annotations

import io
import os
import re
import tarfile
import time

#: PAX records whose meaning this module reproduces (tar ignores ``atime``/``ctime`` here:
#: without ``--incremental`` it sets the access time to its own start).
_PAX_KEYS = frozenset({"path", "size", "mtime", "atime", "ctime", "uid", "gid", "uname", "gname"})
_PAX_TIME = re.compile(r"([0-9]{1,12})(?:\.([0-9]{1,9}))?")
_PLAIN_NAME = re.compile(r"[ -~]+")  # printable ASCII
_MAX_MEMBERS = 10_000
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class _ToTar(Exception):
    """This archive is left to tar."""


def unpack(data: bytes, into: str, file_limit: int) -> bool:
    """Unpack the tar stream ``data`` into the empty folder ``into`` as ``tar -x -C into`` would
    (run under the same rlimits: ``file_limit`` is RLIMIT_FSIZE's). False when it is left to tar,
    with ``into`` as empty as it was."""
    if os.geteuid() == 0:
        return False  # tar's root semantics (owners, no umask) are not reproduced here
    try:
        if os.listdir(into):
            return False
        members = _members(data, file_limit)
    except (_ToTar, OSError, tarfile.TarError, ValueError, UnicodeError):
        return False
    try:
        _extract(data, members, into)
    except OSError:
        _empty(into)
        return False
    return True


def _members(data: bytes, file_limit: int) -> list[tuple[tarfile.TarInfo, str, int]]:
    """(member, its path, its modification time in ns) of every member, or _ToTar."""
    out: list[tuple[tarfile.TarInfo, str, int]] = []
    dirs: set[str] = {""}
    seen: set[str] = set()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
        for member in archive:
            if len(out) >= _MAX_MEMBERS:
                raise _ToTar("members")
            if not (member.isreg() or member.isdir()) or member.issparse():
                raise _ToTar(member.name)
            if set(member.pax_headers) - _PAX_KEYS:
                raise _ToTar(member.name)
            name = member.name
            parts = name.split("/")
            if (not _PLAIN_NAME.fullmatch(name) or name in seen
                    or any(p in ("", ".", "..") for p in parts)):
                raise _ToTar(name)
            if "/".join(parts[:-1]) not in dirs:
                raise _ToTar(name)  # tar would make the folders in between itself
            if member.mode & ~0o777:
                raise _ToTar(name)
            if member.isdir():
                if member.mode & 0o300 != 0o300:
                    raise _ToTar(name)
                dirs.add(name)
            elif member.size > file_limit:
                raise _ToTar(name)  # tar's write fails (SIGXFSZ, EFBIG): its message
            seen.add(name)
            out.append((member, name, _mtime_ns(member)))
    return out


def _mtime_ns(member: tarfile.TarInfo) -> int:
    raw = member.pax_headers.get("mtime")
    if raw is None:
        if not isinstance(member.mtime, int) or member.mtime < 0:
            raise _ToTar(member.name)
        return member.mtime * 1_000_000_000
    match = _PAX_TIME.fullmatch(raw)
    if match is None:
        raise _ToTar(member.name)
    return int(match.group(1)) * 1_000_000_000 + int((match.group(2) or "").ljust(9, "0"))


def _extract(data: bytes, members: list[tuple[tarfile.TarInfo, str, int]], into: str) -> None:
    start = time.time_ns()  # tar's start_time
    umask = os.umask(0)
    os.umask(umask)
    view = memoryview(data)
    delayed: list[tuple[str, int, int]] = []  # (name, mode, mtime ns); the last is the head

    def settle(name: str) -> None:
        """tar's apply_nonancestor_delayed_set_stat: from the head, every delayed folder that
        is not an ancestor of ``name`` gets its mode and times; stop at the first that is."""
        while delayed:
            folder, mode, mtime = delayed[-1]
            if len(folder) < len(name) and name[len(folder)] == "/" and name.startswith(folder):
                return
            delayed.pop()
            path = os.path.join(into, folder)
            if os.stat(path).st_mode & 0o7777 != mode:
                os.chmod(path, mode)
            os.utime(path, ns=(start, mtime))

    for member, name, mtime in members:
        settle(name)
        path = os.path.join(into, name)
        if member.isdir():
            os.mkdir(path, (member.mode | 0o300) & 0o777)
            delayed.append((name, member.mode & 0o777 & ~umask, mtime))
            continue
        fd = os.open(path, _FILE_FLAGS, member.mode & 0o777)
        try:
            body = view[member.offset_data:member.offset_data + member.size]
            if len(body) != member.size:
                raise OSError("the archive ends inside a file")
            while body:
                body = body[os.write(fd, body):]
            os.utime(fd, ns=(start, mtime))
        finally:
            os.close(fd)
    settle("")


def _empty(into: str) -> None:
    """Remove everything under ``into`` (a failed unpack's leftovers), never ``into`` itself."""
    for root, dirnames, _ in os.walk(into):
        for name in dirnames:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chmod(path, 0o700)
    for root, dirnames, filenames in os.walk(into, topdown=False):
        for name in filenames:
            os.unlink(os.path.join(root, name))
        for name in dirnames:
            path = os.path.join(root, name)
            if os.path.islink(path):
                os.unlink(path)
            else:
                os.rmdir(path)
