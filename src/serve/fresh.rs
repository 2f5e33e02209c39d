//! Which device samples are exported at all: read by the device and MIG families and by the
//! state thread, so it sits below all three.

use crate::model::{DeviceSample, DeviceSnapshot};

/// The latest sample, unless it is old (stale) or the GPU is lost.
pub fn fresh(d: &DeviceSnapshot) -> Option<&DeviceSample> {
    d.sample.as_ref().filter(|s| !d.stale && !s.lost)
}
