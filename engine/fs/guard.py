"""The two rules for every file and directory the engine creates, writes, truncates or
deletes (docs/DURABILITY.md, "File modes and links"):

- **No links followed when changing anything.** Files opened for writing get ``O_NOFOLLOW``
  (``open_file``); directories are made with ``make_dir`` (an existing link is refused, not
  used) and removed with ``remove_tree``, which walks from the data dir root by file
  descriptor and refuses a link anywhere on the way (``shutil.rmtree`` alone checks only the
  last component). A link where the engine expects its own file or directory raises
  ``UnexpectedLink`` (exit 3), naming it. Only the data dir root itself may be a link.
- **Modes.** A new file is 0600 and a new directory 0700, unless its parent directory is
  shared with a group (setgid and group rwx, e.g. ``mkdir -m 2770``): then 0660 and 2770.
  The data dir's own mode is the setting: every process reads it from the disk, so all agree.

A full disk while creating is a ``StorageError`` saying "disk full" (``errors.os_error``).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat

from ..errors import CorruptRecordError, StorageError, disk_full, os_error

GROUP_SHARED = stat.S_ISGID | 0o070  # a directory with these bits shares new files with its group


class UnexpectedLink(CorruptRecordError):
    """A symbolic link where the engine expects its own file or directory: never followed."""

    def __init__(self, path: str) -> None:
        super().__init__(f"{path} is a symbolic link where rivven keeps its own file or "
                         "directory; rivven never follows links inside its data dir (only the "
                         "data dir itself may be one): replace the link with what it points "
                         "to, or remove it", path)


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
    """``open(path, "w", opener=guard.opener)``: a file object made by ``open_file``."""
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
