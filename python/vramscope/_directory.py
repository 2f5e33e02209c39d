"""Finding and vetting the channel directory (spec section 1)."""

import os
import stat


class ChannelError(Exception):
    """The channel cannot be created; the message is the one-line reason shown to the user."""


def channel_dir(env=None):
    """`$VRAMSCOPE_DIR`, else `/dev/shm/vramscope-<uid>`, else `$XDG_RUNTIME_DIR/vramscope`."""
    env = os.environ if env is None else env
    explicit = env.get("VRAMSCOPE_DIR", "")
    if explicit:
        return explicit
    if os.path.isdir("/dev/shm"):
        return "/dev/shm/vramscope-%d" % os.geteuid()
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if runtime:
        return os.path.join(runtime, "vramscope")
    raise ChannelError("no channel directory: neither /dev/shm nor XDG_RUNTIME_DIR exists")


def open_dir(path):
    """A descriptor on `path`, created 0700 if missing, after the spec's ownership checks.

    Working through the descriptor afterwards means a directory swapped for a symlink after
    the checks cannot redirect the file.
    """
    created = False
    try:
        os.mkdir(path, 0o700)
        created = True
    except FileExistsError:
        pass
    except OSError as e:
        raise ChannelError("cannot create %s: %s" % (path, e.strerror or e))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if os.path.islink(path):
            raise ChannelError("%s is a symbolic link" % path)
        raise ChannelError("cannot open %s: %s" % (path, e.strerror or e))
    try:
        st = os.fstat(fd)
        if created and stat.S_IMODE(st.st_mode) != 0o700:
            # A restrictive umask may have removed the owner's own bits.
            os.fchmod(fd, 0o700)
            st = os.fstat(fd)
        _check(path, st)
    except ChannelError:
        os.close(fd)
        raise
    except OSError as e:
        os.close(fd)
        raise ChannelError("cannot use %s: %s" % (path, e.strerror or e))
    return fd


def _check(path, st):
    if not stat.S_ISDIR(st.st_mode):
        raise ChannelError("%s is not a directory" % path)
    if st.st_uid != os.geteuid():
        raise ChannelError("%s belongs to uid %d, not %d" % (path, st.st_uid, os.geteuid()))
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise ChannelError(
            "%s is open to group or others (mode %03o); it must be 0700"
            % (path, stat.S_IMODE(st.st_mode))
        )
