"""Who is writing: the header's process, launcher and text fields (spec section 2.1)."""

import os
import sys
import time

from . import _layout as L


class Identity:
    """Everything the header records about the writing process, gathered once."""

    __slots__ = (
        "pid",
        "starttime",
        "pidns_inode",
        "uid",
        "created_realtime_ns",
        "created_monotonic_ns",
        "kind",
        "sample_period_us",
        "rank",
        "local_rank",
        "world_size",
        "job_id",
        "framework",
        "cmdline",
        "allocator_config",
        "flags",
    )

    def __init__(self, kind, framework="", sample_period_us=0, allocator_config="", flags=0):
        env = os.environ
        self.pid = os.getpid()
        self.starttime = proc_starttime()
        self.pidns_inode = pid_namespace_inode()
        self.uid = os.geteuid()
        # Taken back to back so a reader can turn monotonic stamps into wall time.
        self.created_realtime_ns = time.time_ns()
        self.created_monotonic_ns = time.monotonic_ns()
        self.kind = kind
        self.sample_period_us = sample_period_us
        self.rank, self.local_rank, self.world_size = ranks(env)
        self.job_id = job_id(env)
        self.framework = framework
        self.cmdline = command_line()
        self.allocator_config = allocator_config
        self.flags = flags


def proc_starttime(pid="self"):
    """Field 22 of /proc/<pid>/stat: clock ticks since boot when the process started.

    The command name (field 2) may contain spaces and parentheses, so fields are counted
    from the last ')'.
    """
    with open("/proc/%s/stat" % pid, "rb") as f:
        data = f.read()
    rest = data[data.rindex(b")") + 2 :].split()
    return int(rest[19])


def pid_namespace_inode():
    try:
        return os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return L.ABSENT


def _int_env(env, name):
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return None


def ranks(env):
    """(rank, local rank, world size), -1 each when the process is not one of several ranks.

    torchrun, accelerate and deepspeed set RANK/LOCAL_RANK/WORLD_SIZE; a bare `srun` only
    sets the SLURM names.
    """
    rank = _int_env(env, "RANK")
    local = _int_env(env, "LOCAL_RANK")
    world = _int_env(env, "WORLD_SIZE")
    if rank is None and world is None:
        ntasks = _int_env(env, "SLURM_NTASKS")
        if ntasks is not None and ntasks > 1:
            rank = _int_env(env, "SLURM_PROCID")
            local = _int_env(env, "SLURM_LOCALID")
            world = ntasks
    return tuple(-1 if v is None or not -(2**31) <= v < 2**31 else v for v in (rank, local, world))


def job_id(env):
    run_id = env.get("TORCHELASTIC_RUN_ID", "")
    # torchrun's default rendezvous id is the literal "none", which names no job.
    if run_id and run_id != "none":
        return run_id
    return env.get("SLURM_JOB_ID", "")


def command_line():
    try:
        with open("/proc/self/cmdline", "rb") as f:
            raw = f.read()
        args = [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]
    except OSError:
        args = [sys.executable] + list(sys.argv)
    return " ".join(args)


def _mig_uuid_bytes(entry):
    """The 16 bytes of a `MIG-<uuid>` entry; None for anything else (a GPU index or UUID,
    or the legacy `MIG-GPU-<uuid>/<GI>/<CI>`, which names no MIG device UUID)."""
    if not entry.startswith("MIG-") or entry.startswith("MIG-GPU-"):
        return None
    text = entry[4:].replace("-", "")
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        return None
    return raw if len(raw) == 16 else None


def visible_mig_uuids(env=None):
    """The MIG device UUIDs CUDA_VISIBLE_DEVICES names, in its order (CUDA numbers the
    visible devices so): 16 raw bytes each, None at a position that names something else."""
    env = os.environ if env is None else env
    value = env.get("CUDA_VISIBLE_DEVICES", "")
    if "MIG-" not in value:
        return []
    return [_mig_uuid_bytes(e.strip()) for e in value.split(",")]


def mig_identity(ordinal, uuid, env=None):
    """(uuid, is_mig) for CUDA device `ordinal` whose framework gave `uuid` (16 bytes or
    None). A UUID that CUDA_VISIBLE_DEVICES names as a MIG device is one. A framework whose
    CUDA reports the parent GPU's UUID for a MIG device (older runtimes) gives way to the MIG
    UUID at the device's place in CUDA_VISIBLE_DEVICES, so the monitor still finds the
    instance."""
    migs = visible_mig_uuids(env)
    if not migs:
        return uuid, False
    if uuid is not None and bytes(uuid) in migs:
        return uuid, True
    try:
        at = migs[int(ordinal)] if 0 <= int(ordinal) < len(migs) else None
    except (TypeError, ValueError):
        at = None
    if at is not None:
        return at, True
    return uuid, False


def fit_utf8(text, size):
    """`text` as UTF-8 cut to at most `size` bytes without splitting a character."""
    raw = text.encode("utf-8", "replace")
    if len(raw) <= size:
        return raw
    return raw[:size].decode("utf-8", "ignore").encode("utf-8")
