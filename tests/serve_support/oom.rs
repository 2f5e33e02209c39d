//! A process that dies of an OOM, as `serve`'s tests drive it: rank 1 of `job-42` on GPU 0
//! trains, then its writer reports an OOM and ends with the uncaught error.

use super::{find, samples, value};
use crate::common::GIB;
use vramscope::channel::{DeviceFigures, EventFields, EventKind, Exit, SampleFields, Writer};

/// Rank 1 of `job-42` on GPU 0 at step 40: 9 GiB allocated, 10 reserved, a 12 GiB spike,
/// and an allocator counter that has not counted any OOM.
pub fn train(writer: &mut Writer) {
    for peak in [9 * GIB, 12 * GIB, 9 * GIB] {
        writer.sample(&SampleFields {
            slot: 0,
            allocated: Some(9 * GIB),
            reserved: Some(10 * GIB),
            peak: Some(peak),
            step: Some(40),
            ..SampleFields::default()
        });
    }
    writer.publish_device(
        0,
        &DeviceFigures {
            allocated: Some(9 * GIB),
            reserved: Some(10 * GIB),
            ooms: Some(0),
            ..DeviceFigures::default()
        },
    );
    writer.status(Some(40), "backward");
}

/// The writer's OOM event for a 6 GiB request, then the uncaught error that ends it.
pub fn die_of_an_oom(mut writer: Writer) {
    writer.event(&EventFields {
        slot: Some(0),
        step: Some(40),
        args: [6 * GIB, GIB, 80 * GIB, 9 * GIB, 10 * GIB, 0],
        text: "backward",
        ..EventFields::new(EventKind::Oom)
    });
    writer.event(&EventFields {
        step: Some(40),
        args: [6 * GIB, 0, 0, 0, 0, 0],
        text: "CUDA out of memory. Tried to allocate 6.00 GiB",
        ..EventFields::new(EventKind::OomError)
    });
    writer
        .finish(Exit::Error("CUDA out of memory".into()))
        .unwrap();
}

/// The failures of one scrape against what must be exported for `pid` once it died: one
/// OOM, the 12 GiB peak and step 40, each with the rank labels.
pub fn missing(text: &str, pid: &str) -> Vec<String> {
    let all = samples(text);
    let ranked = [
        ("pid", pid),
        ("gpu", "0"),
        ("rank", "1"),
        ("local_rank", "1"),
        ("job_id", "job-42"),
    ];
    let want = [
        ("vramscope_process_allocator_ooms_total", 1.0),
        ("vramscope_process_allocator_peak_bytes", (12 * GIB) as f64),
        ("vramscope_process_step", 40.0),
    ];
    want.iter()
        .filter(|(name, want)| value(&all, name, &ranked) != Some(*want))
        .map(|(name, want)| {
            let got: Vec<String> = find(&all, name, &[("pid", pid)])
                .iter()
                .map(|l| format!("{l:?}"))
                .collect();
            format!("{name} = {want} with rank labels; got {got:?}")
        })
        .collect()
}
