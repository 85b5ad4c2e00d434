"""Names, safe creation and durable writes of the data dir's files, in one place.

Segment files are named by their 20-digit zero-padded base offset, so that ``ls`` sorts them
by offset. A segment is its ``.log``: the ``.log`` is installed last and deleted first
(``INSTALL_ORDER``/``DELETE_ORDER``), so indexes without their ``.log`` are debris a writer
removes, never a segment.

Every file and directory the engine creates, writes, truncates or deletes goes through the
helpers here, which hold three rules (docs/DURABILITY.md, "File modes, links, locks"):

- **No links followed when changing anything.** Files opened for writing get ``O_NOFOLLOW``;
  directories are made with ``make_dir`` (an existing link is refused, not used) and removed
  with ``remove_tree``, which walks from the data dir root by file descriptor and refuses a
  link anywhere on the way (``shutil.rmtree`` alone checks only the last component). A link
  where the engine expects its own file or directory raises ``UnexpectedLink`` (exit 3),
  naming it. Only the data dir root itself may be a link.
- **Modes.** A new file is 0600 and a new directory 0700, unless its parent directory is
  shared with a group (setgid and group rwx, e.g. ``mkdir -m 2770``): then 0660 and 2770.
  The data dir's own mode is the setting: every process reads it from the disk, so all agree.
- **A full disk** is a ``StorageError`` naming the path and "disk full" (``errors.os_error``).
  ``write_atomic`` on a full disk gives up the data dir's space reserve (``RESERVE``, made by
  every writable open that finds room) and tries once more, so the commands that free space
  can record what they do.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat

from ..errors import CorruptRecordError, StorageError, os_error

LOG, INDEX, TIMEINDEX = ".log", ".index", ".timeindex"
SEGMENT_FILES = (LOG, INDEX, TIMEINDEX)  # every file of a segment
INSTALL_ORDER = (INDEX, TIMEINDEX, LOG)  # indexes first: a .log is the segment
DELETE_ORDER = (LOG, INDEX, TIMEINDEX)  # .log first, for the same reason
CLEANED, SWAP = ".cleaned", ".swap"
LOCK_FILE = ".lock"
CHECKPOINT = ".checkpoint"
RESERVE = ".rivven-reserve"  # in the data dir root: space given up when the disk is full
RESERVE_BYTES = 256 << 10  # a few catalogs' or many checkpoints' worth
RESERVE_ROOM = 4 * RESERVE_BYTES  # free space needed before the reserve is made (again)
GROUP_SHARED = stat.S_ISGID | 0o070  # a directory with these bits shares new files with its group


class UnexpectedLink(CorruptRecordError):
    """A symbolic link where the engine expects its own file or directory: never followed."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path} is a symbolic link where rivven keeps its own file or "
                         "directory; rivven never follows links inside its data dir (only the "
                         "data dir itself may be one): replace the link with what it points "
                         "to, or remove it", path)


# ------------------------------------------------------------------------------ modes
def modes(directory: str) -> tuple[int, int]:
    """(file mode, dir mode) for what is created in ``directory``: private (0600/0700), or
    shared with the group when ``directory`` is (setgid + group rwx: 0660/2770)."""
    try:
        shared = os.stat(directory).st_mode & GROUP_SHARED == GROUP_SHARED
    except OSError:
        shared = False
    return (0o660, 0o2770) if shared else (0o600, 0o700)


def _fix_mode(fd: int, mode: int) -> None:
    """(Group-shared only: the umask may have taken the group's bits.) Set ``mode`` on a
    file this process owns; one it does not own keeps its mode."""
    st = os.fstat(fd)
    if st.st_mode & 0o7777 != mode and st.st_uid == os.geteuid():
        os.fchmod(fd, mode)


def open_file(path: str, flags: int) -> int:
    """``os.open`` for writing (or creating) one of the engine's files: never through a link
    (``UnexpectedLink``), created with the policy's mode. OSErrors other than a link pass."""
    if flags & os.O_CREAT:
        mode = modes(os.path.dirname(path) or ".")[0]
        try:
            fd = os.open(path, flags | os.O_NOFOLLOW, mode)
        except OSError as e:
            if disk_full(e):
                raise os_error(e, "create", path) from e
            raise _link_or(e, path) from None
        if mode != 0o600:
            try:
                _fix_mode(fd, mode)
            except BaseException:
                os.close(fd)
                raise
        return fd
    try:
        return os.open(path, flags | os.O_NOFOLLOW)
    except OSError as e:
        raise _link_or(e, path) from None


def opener(path: str, flags: int) -> int:
    """``open(path, "w", opener=files.opener)``: a file object made by ``open_file``."""
    return open_file(path, flags)


def _link_or(e: OSError, path: str) -> Exception:
    """``UnexpectedLink`` when ``e`` came from a link at ``path`` (O_NOFOLLOW), else ``e``."""
    if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
        try:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                return UnexpectedLink(path)
        except OSError:
            pass
    return e


def real_dir(path: str) -> bool:
    """Is ``path`` an existing directory (not a link to one)? ``UnexpectedLink`` for a link;
    False when missing."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(st.st_mode):
        raise UnexpectedLink(path)
    if not stat.S_ISDIR(st.st_mode):
        raise StorageError(f"{path} is a file where rivven keeps a directory; move it away")
    return True


def check_own_dir(directory: str, levels: int = 1) -> None:
    """``directory`` and its ``levels - 1`` nearest parents are real directories (a partition
    dir, its topic dir and ``topics/``: 3): ``UnexpectedLink`` names the first link. Missing
    ones are left to the caller."""
    for _ in range(levels):
        try:
            if stat.S_ISLNK(os.lstat(directory).st_mode):
                raise UnexpectedLink(directory)
        except FileNotFoundError:
            pass
        directory = os.path.dirname(directory)


def make_dir(path: str) -> bool:
    """Make the directory ``path`` (its parent exists) with the policy's mode; an existing
    directory is fine, an existing link is refused. Returns True when it was made."""
    if real_dir(path):
        return False
    mode = modes(os.path.dirname(path) or ".")[1]
    try:
        os.mkdir(path, mode & 0o777)
    except FileExistsError:  # (made by another process meanwhile)
        real_dir(path)
        return False
    except OSError as e:
        if disk_full(e):
            raise os_error(e, "create", path) from e
        raise
    if mode != 0o700:  # (mkdir ignores setgid and the umask may take the group's bits)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            _fix_mode(fd, mode)
        finally:
            os.close(fd)
    return True


def make_dirs(root: str, path: str) -> None:
    """Make ``path`` and the directories between it and ``root`` (which exists), each as
    ``make_dir`` does: no link on the way is followed. (An ``lstat`` per component when
    they are there already.)"""
    rel = os.path.relpath(path, root)
    if rel == ".":
        return
    d = root
    for part in _parts(rel, path, root):
        d = os.path.join(d, part)
        make_dir(d)


def make_path(path: str) -> None:
    """``os.makedirs(path, exist_ok=True)`` where no data dir root is at hand (a staging
    folder on a Spark executor, a local cold store): each directory made gets the mode policy
    of its parent; ``path`` itself must not be a link."""
    if real_dir(path):
        return
    parent = os.path.dirname(path)
    if parent and parent != path and not os.path.isdir(parent):
        make_path(parent)
    make_dir(path)


def _parts(rel: str, path: str, root: str) -> list[str]:
    parts = rel.split(os.sep)
    if os.path.isabs(rel) or ".." in parts:
        raise ValueError(f"{path} is not inside {root}")
    return parts


def _open_dir_chain(root: str, parts: list[str]) -> int | None:
    """An fd of ``root/parts...`` opened one component at a time without following a link
    (``UnexpectedLink``); None when a component is missing."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return None
    d = root
    try:
        for part in parts:
            d = os.path.join(d, part)
            try:
                nfd = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                os.close(fd)
                return None
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):
                    st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                    if stat.S_ISLNK(st.st_mode):
                        raise UnexpectedLink(d) from None
                raise
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def remove_tree(root: str, path: str) -> None:
    """Remove ``path`` inside ``root``: a directory with everything in it, a file, or a link
    (the link itself). No link is followed: every directory from ``root`` down to ``path``'s
    parent must be a real one (``UnexpectedLink`` otherwise), and links inside the tree are
    removed, never entered. A missing ``path`` is fine; like ``rmtree(ignore_errors=True)``
    otherwise (what cannot be removed stays)."""
    parts = _parts(os.path.relpath(path, root), path, root)
    dfd = _open_dir_chain(root, parts[:-1])
    if dfd is None:
        return
    try:
        name = parts[-1]
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(name, ignore_errors=True, dir_fd=dfd)
        else:
            try:
                os.unlink(name, dir_fd=dfd)
            except FileNotFoundError:
                pass
    finally:
        os.close(dfd)


# ------------------------------------------------------------------------------ full disk
_reserves: set[str] = set()  # data dirs (absolute) whose RESERVE this process may give up


def disk_full(e: BaseException) -> bool:
    """Is ``e`` (or what caused it) an ENOSPC/EDQUOT?"""
    while e is not None:
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        e = e.__cause__  # type: ignore[assignment]
    return False


def keep_reserve(data_dir: str) -> None:
    """(A writable open.) Make the data dir's space reserve when it is missing and the disk
    has room for it several times over; remember the data dir so ``write_atomic`` may give it
    up. One ``stat`` when it is there."""
    data_dir = os.path.abspath(data_dir)
    _reserves.add(data_dir)
    path = os.path.join(data_dir, RESERVE)
    try:
        os.lstat(path)
        return
    except FileNotFoundError:
        pass
    try:
        st = os.statvfs(data_dir)
        if st.f_bavail * st.f_frsize < RESERVE_ROOM:
            return  # (not while space is short: it is made again once there is room)
        tmp = f"{path}.tmp.{os.getpid()}"
        fd = open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            try:
                os.posix_fallocate(fd, 0, RESERVE_BYTES)
            except OSError:  # (a file system without fallocate)
                os.pwrite(fd, bytes(RESERVE_BYTES), 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except (OSError, StorageError):
        try:
            os.unlink(f"{path}.tmp.{os.getpid()}")
        except OSError:
            pass


def give_up_reserve(target: str) -> bool:
    """Delete the space reserve of the data dir holding ``target``; False when there is
    none (left) to give."""
    target = os.path.abspath(target)
    for d in _reserves:
        if target.startswith(d + os.sep):
            try:
                os.unlink(os.path.join(d, RESERVE))
                return True
            except OSError:
                return False
    return False


def name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def path(directory: str, base_offset: int, suffix: str) -> str:
    return os.path.join(directory, name(base_offset, suffix))


def parse(filename: str) -> tuple[int, str] | None:
    """``(base_offset, suffix)`` of a segment file name, or None for anything else."""
    stem, dot, rest = filename.partition(".")
    if len(stem) != 20 or not stem.isdigit() or not dot:
        return None
    return int(stem), "." + rest


def segment_bases(directory: str) -> list[int]:
    """Sorted base offsets of the ``.log`` files in a partition directory."""
    out = []
    for f in os.listdir(directory):
        p = parse(f)
        if p is not None and p[1] == LOG:
            out.append(p[0])
    out.sort()
    return out


def partition_dir(data_dir: str, topic: str, partition: int) -> str:
    return os.path.join(data_dir, "topics", topic, f"partition-{partition}")


def delete_segment(directory: str, base: int) -> int:
    """Unlink a segment's files in DELETE_ORDER (missing ones are fine; a link is unlinked,
    never followed); returns the ``.log``'s size. The caller fsyncs the directory."""
    size = 0
    for suffix in DELETE_ORDER:
        p = path(directory, base, suffix)
        try:
            if suffix == LOG:
                size = os.lstat(p).st_size
            os.unlink(p)
        except FileNotFoundError:
            pass
    return size


def fsync_file(target: str) -> None:
    fd = os.open(target, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def remove_write_debris(directory: str) -> None:
    """Temp files of ``write_atomic`` calls cut short by a crash (``NAME.tmp.PID``). Only for
    a directory whose files are written under a lock the caller holds."""
    for f in os.listdir(directory):
        stem, sep, pid = f.rpartition(".tmp.")
        if sep and stem and pid.isdigit():
            os.unlink(os.path.join(directory, f))


def write_atomic(target: str, data: bytes) -> None:
    """tmp, fsync, rename, fsync dir: a reader sees the old file or the new one, never a mix.
    The temp file is never a link's target (O_NOFOLLOW), and the rename replaces a link at
    ``target`` rather than writing through it. A full disk gives up the data dir's space
    reserve and tries once more; then it is a StorageError saying "disk full"."""
    try:
        _write_atomic(target, data)
        return
    except OSError as e:
        if not disk_full(e) or not give_up_reserve(target):
            raise os_error(e, "write", target) from e
    except StorageError as e:  # (open_file: a full disk when creating the temp file)
        if not disk_full(e) or not give_up_reserve(target):
            raise
    try:
        _write_atomic(target, data)
    except OSError as e:
        raise os_error(e, "write", target) from e


def _write_atomic(target: str, data: bytes) -> None:
    tmp = f"{target}.tmp.{os.getpid()}"
    fd = open_file(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except OSError:
        try:
            os.unlink(tmp)  # (a full disk: the part written holds space)
        except OSError:
            pass
        raise
    fsync_dir(os.path.dirname(target) or ".")
