"""Offsets, sizes and codes of the channel file, version 1 (docs/channel-v1.md).

Every number the writer puts in the file comes from here, so the spec maps to one place.
"""

MAGIC = b"VRAMSCOP"
ENDIAN_TAG = 0x01020304
MAJOR = 1
MINOR = 0
HEADER_SIZE = 512
ABSENT = 0xFFFFFFFFFFFFFFFF
U64_MAX_VALUE = ABSENT - 1
PAGE = 4096

# Header fields (section 2.1).
H_MAGIC = 0x000
H_ENDIAN = 0x008
H_VERSION = 0x00C
H_HEADER_SIZE = 0x010
H_FLAGS = 0x014
H_FILE_SIZE = 0x018
H_STATE = 0x020
H_HEARTBEAT = 0x028
H_PID = 0x030
H_STARTTIME = 0x038
H_PIDNS = 0x040
H_UID = 0x048
H_CREATED_REALTIME = 0x050
H_CREATED_MONOTONIC = 0x058
H_KIND = 0x060
H_PERIOD_US = 0x064
H_RANKS = 0x068
H_JOB_ID = 0x080
H_FRAMEWORK = 0x0C0
H_CMDLINE = 0x100
H_ALLOC_CONF = 0x180
H_SECTIONS = 0x1C0

JOB_ID_SIZE = 64
FRAMEWORK_SIZE = 64
CMDLINE_SIZE = 128
ALLOC_CONF_SIZE = 64

FLAG_PEAK_RESET = 1 << 0
FLAG_MODULE_ATTRIBUTION = 1 << 1
# The writer records the allocator's history and answers snapshot requests (0x220).
FLAG_SITES = 1 << 2
# The writer was started by `vramscope attach` in a running process: its framework peak
# counters cover the time before the attach too.
FLAG_ATTACHED = 1 << 3

STATE_STARTING = 0
STATE_RUNNING = 1
STATE_EXITED_CLEAN = 2
STATE_EXITED_ERROR = 3

KIND_PYTORCH = 1
KIND_JAX = 2
KIND_TENSORFLOW = 3
KIND_CUPY = 4
KIND_PYTHON = 5
KIND_C = 16
KIND_RUST = 17

# Control (section 2.3).
CONTROL = 0x200
C_DEVICES = 0x200
C_SAMPLES_HEAD = 0x208
C_EVENTS_HEAD = 0x210
C_STRINGS = 0x218
# The one field a reader writes: snapshot requests, a count it increments.
C_SNAPSHOT_REQUESTS = 0x220

# Status (section 2.4).
STATUS = 0x240
STATUS_SIZE = 192
LABEL_MAX = 160

# The spare (section 3): the block being updated, as it stood before the update.
SPARE_SEQ = 0x300
SPARE_BLOCK = 0x308
SPARE_COPY = 0x310
STATUS_COPY = STATUS_SIZE - 8  # every status field after its seq
DEVICE_COPY = 0xB0  # a device slot's identity and figures, +0x08 to +0xB8

# Device slot (section 2.5); offsets inside one slot.
DEVICE_SIZE = 256
D_SEQ = 0x00
D_ORDINAL = 0x08
D_UUID = 0x10
D_PCI = 0x20
D_TOTAL = 0x30
D_FIGURES = 0x38
DEVICE_UUID_VALID = 1 << 0
DEVICE_PCI_VALID = 1 << 1
# The UUID names a MIG device (`MIG-...`), not a whole GPU.
DEVICE_UUID_MIG = 1 << 2
UUID_SIZE = 16
PCI_SIZE = 16
# The [M] figures from +0x38 to +0xB8, in file order.
DEVICE_FIGURES = (
    "t",
    "allocated",
    "allocated_peak",
    "reserved",
    "reserved_peak",
    "active",
    "inactive_split",
    "requested",
    "retries",
    "ooms",
    "device_allocs",
    "device_frees",
    "device_free",
    "limit",
    "interval_peak",
    "step_peak",
)

STRING_SIZE = 64
STRING_MAX = 63

SAMPLE_SIZE = 64
SAMPLE_CRC = 0x3C
SAMPLE_PEAK_EXACT = 1 << 0
SAMPLE_NEW_HIGH_WATER = 1 << 1
SAMPLE_FOREIGN_RESET_SEEN = 1 << 2
SAMPLE_HOOK = 1 << 3
# The step counts the steps since `vramscope attach`, not the job's own.
SAMPLE_STEP_SINCE_ATTACH = 1 << 4

EVENT_SIZE = 256
EVENT_CRC = 0xFC
EVENT_TEXT_MAX = 172
NO_SLOT = 0xFFFF

EV_OOM = 1
EV_OOM_ERROR = 2
EV_PHASE_BEGIN = 3
EV_PHASE_END = 4
EV_STEP_END = 5
EV_MARK = 6
EV_NEW_HIGH_WATER = 7
EV_ALLOC_RETRY = 8
EV_EXIT = 9
EV_SNAPSHOT_WRITTEN = 10
EV_FOREIGN_PEAK_RESET = 11
EV_EMPTY_CACHE = 12
# Memory by kind, at a step's end where it changed: a0 parameters, a1 buffers, a2 gradients,
# a3 optimizer state (bytes; ABSENT where not known).
EV_MEMORY_KINDS = 13

# SNAPSHOT_WRITTEN's a2: why the snapshot was dumped.
SNAPSHOT_OOM = 0
SNAPSHOT_PEAK = 1
SNAPSHOT_REQUEST = 2

DEFAULT_DEVICES = 16
DEFAULT_STRINGS = 32
DEFAULT_SAMPLES = 4096
DEFAULT_EVENTS = 512


def _align(value, to):
    return (value + to - 1) // to * to


class Layout:
    """Where the four arrays go for given capacities.

    Rings start on a page boundary, which with the default capacities gives the offsets of
    the spec's table (0x400, 0x1400, 0x2000, 0x42000) and a 401,408-byte file.
    """

    def __init__(
        self,
        devices=DEFAULT_DEVICES,
        strings=DEFAULT_STRINGS,
        samples=DEFAULT_SAMPLES,
        events=DEFAULT_EVENTS,
    ):
        if not 1 <= devices <= 64:
            raise ValueError("device capacity must be in 1..=64")
        if not 0 <= strings <= 1024:
            raise ValueError("string capacity must be in 0..=1024")
        for cap in (samples, events):
            if cap < 1 or cap > 1 << 20 or cap & (cap - 1):
                raise ValueError("ring capacities must be powers of two in 1..=2^20")
        self.devices = devices
        self.strings = strings
        self.samples = samples
        self.events = events
        self.devices_offset = 0x400
        self.strings_offset = self.devices_offset + devices * DEVICE_SIZE
        self.samples_offset = _align(self.strings_offset + strings * STRING_SIZE, PAGE)
        self.events_offset = _align(self.samples_offset + samples * SAMPLE_SIZE, PAGE)
        self.file_size = _align(self.events_offset + events * EVENT_SIZE, PAGE)

    def sections(self):
        """(offset, record size, capacity) in section-table order."""
        return (
            (self.devices_offset, DEVICE_SIZE, self.devices),
            (self.strings_offset, STRING_SIZE, self.strings),
            (self.samples_offset, SAMPLE_SIZE, self.samples),
            (self.events_offset, EVENT_SIZE, self.events),
        )
