//! The recording bundled in the binary that `vramscope demo` (and the monitor's `d` key) plays,
//! so that anyone can see what vramscope shows without a GPU: a simulated two-minute training run whose memory grows,
//! spikes inside one step and ends in an OOM, with its allocator's figures (made by
//! `examples/make_demo.rs` against the fake NVML library). The screen says it is simulated.

use super::Replay;

const RECORDING: &[u8] = include_bytes!("../../assets/demo.jsonl.zst");

/// What the header says for as long as the demo plays.
const LABEL: &str = "DEMO: simulated data, no GPU";

/// Shown when the demo starts.
pub const GREETING: &str = "demo: space pauses, p jumps to the peak, o to the OOM, Enter shows the process, q or Esc goes back";

pub fn replay() -> Result<Replay, String> {
    Replay::from_bytes("demo", RECORDING, LABEL)
}
