//! The figures an out-of-memory error's own message states, for an OOM the monitor has no
//! better figures for (no observer saw it, or the program's `vramscope.oom()` gave no free
//! memory). PyTorch's CUDA message reads: "Tried to allocate 6.00 GiB. GPU 0 has a total
//! capacity of 79.19 GiB of which 2.82 GiB is free. ... Of the allocated memory 70.00 GiB
//! is allocated by PyTorch, and 1.98 GiB is reserved by PyTorch but unallocated." Its
//! figures have two decimals, so they are estimates to that precision, and every OOM that
//! takes one says so (`Oom::from_message`).

/// What a message states; `None` where it states nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MessageFigures {
    pub requested: Option<u64>,
    pub device_total: Option<u64>,
    pub device_free: Option<u64>,
    pub allocated: Option<u64>,
    /// Allocated plus "reserved by PyTorch but unallocated".
    pub reserved: Option<u64>,
}

/// Reads PyTorch's wording; any other message states nothing.
pub fn figures_in(message: &str) -> MessageFigures {
    let requested = size_after(message, "Tried to allocate ");
    let device_total = size_after(message, "total capacity of ");
    let device_free = size_before(message, " is free");
    let allocated = size_before(message, " is allocated by PyTorch");
    let cached = size_before(message, " is reserved by PyTorch but unallocated");
    MessageFigures {
        requested,
        device_total,
        device_free,
        allocated,
        reserved: allocated.zip(cached).map(|(a, c)| a.saturating_add(c)),
    }
}

/// The size that begins right after `prefix`: "6.00 GiB".
fn size_after(message: &str, prefix: &str) -> Option<u64> {
    let at = message.find(prefix)? + prefix.len();
    size_at(&message[at..])
}

/// The size that ends right before `suffix`: "... of which 2.82 GiB is free".
fn size_before(message: &str, suffix: &str) -> Option<u64> {
    let end = message.find(suffix)?;
    let head = &message[..end];
    // Back over the unit, the space and the number.
    let unit_start = head.rfind(' ')?;
    let number_start = head[..unit_start].rfind(' ').map_or(0, |i| i + 1);
    size_at(&head[number_start..])
}

/// "2.82 GiB" (or MiB, KiB, GiB, TiB, bytes) at the start of `text`, in bytes.
fn size_at(text: &str) -> Option<u64> {
    let mut words = text.split_whitespace();
    let number = words.next()?;
    let unit = words.next()?.trim_end_matches(['.', ',', ';', ')']);
    let scale: f64 = match unit {
        "bytes" | "B" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "TiB" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    };
    let value: f64 = number.parse().ok()?;
    // A hostile message's 1e300 or -1 is no figure.
    let bytes = value * scale;
    (value.is_finite() && value >= 0.0 && bytes < u64::MAX as f64).then_some(bytes.round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: f64 = (1u64 << 30) as f64;

    fn gib(x: f64) -> u64 {
        (x * GIB).round() as u64
    }

    #[test]
    fn pytorch_s_message_states_the_request_the_device_and_the_cache() {
        let message = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 6.00 GiB. \
            GPU 0 has a total capacity of 79.19 GiB of which 2.82 GiB is free. Including \
            non-PyTorch memory, this process has 76.36 GiB memory in use. Of the allocated \
            memory 70.00 GiB is allocated by PyTorch, and 1.98 GiB is reserved by PyTorch but \
            unallocated. If reserved but unallocated memory is large try setting \
            PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True";
        assert_eq!(
            figures_in(message),
            MessageFigures {
                requested: Some(gib(6.0)),
                device_total: Some(gib(79.19)),
                device_free: Some(gib(2.82)),
                allocated: Some(gib(70.0)),
                reserved: Some(gib(70.0) + gib(1.98)),
            }
        );
        // Smaller units, as PyTorch prints them for small figures.
        let small = "Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.19 GiB of \
            which 512.00 KiB is free.";
        let f = figures_in(small);
        assert_eq!(f.requested, Some(20 << 20));
        assert_eq!(f.device_free, Some(512 << 10));
        assert_eq!(f.allocated, None);
    }

    #[test]
    fn another_or_a_hostile_message_states_nothing() {
        assert_eq!(
            figures_in("RESOURCE_EXHAUSTED: Out of memory"),
            MessageFigures::default()
        );
        for bad in [
            "Tried to allocate -1.00 GiB",
            "Tried to allocate 1e300 GiB",
            "Tried to allocate NaN GiB",
            "Tried to allocate 5 parsecs",
            "Tried to allocate ",
            " is free",
            "is free",
        ] {
            let f = figures_in(bad);
            assert_eq!((f.requested, f.device_free), (None, None), "{bad}");
        }
    }
}
