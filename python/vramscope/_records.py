"""Plain data passed between adapters, the session and the channel: a device's identity and
one reading of its figures. Kept free of heavy imports: the package's start-up cost is paid
by every interpreter the bootstrap arms."""


from ._identity import mig_identity


class DeviceInfo:
    """What identifies one GPU for the monitor: written once per slot.

    On a MIG device `uuid` is the MIG device's UUID and `mig` is true (`mig=None`: decided
    from CUDA_VISIBLE_DEVICES, see `_identity.mig_identity`), so the monitor joins the slot to
    the MIG instance, not only to its GPU."""

    __slots__ = ("ordinal", "uuid", "pci_bus_id", "total", "mig")

    def __init__(self, ordinal, uuid=None, pci_bus_id=None, total=None, mig=None):
        self.ordinal = ordinal
        self.pci_bus_id = pci_bus_id
        self.total = total
        if mig is None:
            uuid, mig = mig_identity(ordinal, uuid)
        self.uuid = uuid
        self.mig = bool(mig)


class Figures:
    """One reading of one device; None where the framework does not say."""

    __slots__ = (
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
        "requested_peak",
    )

    def __init__(
        self,
        allocated=None,
        allocated_peak=None,
        reserved=None,
        reserved_peak=None,
        active=None,
        inactive_split=None,
        requested=None,
        retries=None,
        ooms=None,
        device_allocs=None,
        device_frees=None,
        device_free=None,
        limit=None,
        requested_peak=None,
    ):
        self.allocated = allocated
        self.allocated_peak = allocated_peak
        self.reserved = reserved
        self.reserved_peak = reserved_peak
        self.active = active
        self.inactive_split = inactive_split
        self.requested = requested
        self.retries = retries
        self.ooms = ooms
        self.device_allocs = device_allocs
        self.device_frees = device_frees
        self.device_free = device_free
        self.limit = limit
        # The peak of the bytes programs asked for (before rounding to blocks): what the
        # allocator's history records, so a snapshot's reconstruction compares with it byte
        # for byte (issue 14). Not published in the row.
        self.requested_peak = requested_peak


def uuid_bytes(uuid):
    """The 16 raw bytes of a CUDA UUID given as torch's `_CUuuid`, bytes or text."""
    if uuid is None:
        return None
    raw = getattr(uuid, "bytes", uuid)
    if isinstance(raw, (bytes, bytearray, list, tuple)):
        try:
            raw = bytes(raw)
        except (TypeError, ValueError):
            raw = None
        if raw is not None and len(raw) == 16:
            return raw
    text = str(uuid).strip()
    for prefix in ("GPU-", "MIG-"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
    text = text.replace("-", "")
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        return None
    return raw if len(raw) == 16 else None


def pci_bus_id(domain, bus, device):
    """NVML's form of a PCI address, `00000000:18:00.0`."""
    return "%08X:%02X:%02X.0" % (domain, bus, device)
