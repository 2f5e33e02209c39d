//! Where a writer's step numbers count from. A writer started with the job counts the job's
//! steps; one that `vramscope attach` started mid-run takes the job's own count from its
//! optimizer where it keeps one, else counts from the attach and says so on every sample
//! (the channel's `STEP_SINCE_ATTACH`). A step from the attach is never shown bare: 92 steps
//! after an attach to a job at step 300 is not "step 92".

use serde::Serialize;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepOrigin {
    /// The job's own count.
    #[default]
    Job,
    /// Steps since the attach.
    Attach,
}

impl StepOrigin {
    pub fn of(since_attach: bool) -> StepOrigin {
        if since_attach {
            StepOrigin::Attach
        } else {
            StepOrigin::Job
        }
    }

    /// The value of `--json`'s `steps_from`.
    pub fn key(self) -> &'static str {
        match self {
            StepOrigin::Job => "job",
            StepOrigin::Attach => "attach",
        }
    }

    /// The origin a `steps_from` value names (a remote `--json`); `None` for anything else.
    pub fn from_key(key: &str) -> Option<StepOrigin> {
        [StepOrigin::Job, StepOrigin::Attach]
            .into_iter()
            .find(|o| o.key() == key)
    }

    /// The 0/1 that formats holding only numbers give it (`/metrics`' family, export's row):
    /// 1 for steps since an attach.
    pub fn since_attach(self) -> u8 {
        u8::from(self == StepOrigin::Attach)
    }

    /// A step as prose says it: `step 92`, or `step 92 since attach`.
    pub fn words(self, step: u64) -> String {
        format!("step {step}{}", self.after())
    }

    /// What follows a step number where a sentence shapes it (`the step-5 peak`): nothing,
    /// or ` since attach`.
    pub fn after(self) -> &'static str {
        match self {
            StepOrigin::Job => "",
            StepOrigin::Attach => " since attach",
        }
    }

    /// A step in a narrow cell (the process table, the cluster view): `92`, or `92+a`
    /// (both screens' help says what `+a` means).
    pub fn cell(self, step: u64) -> String {
        match self {
            StepOrigin::Job => step.to_string(),
            StepOrigin::Attach => format!("{step}{ATTACH_MARK}"),
        }
    }
}

/// What `cell` appends to a step counted from the attach.
pub const ATTACH_MARK: &str = "+a";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_from_the_attach_is_never_said_bare() {
        assert_eq!(StepOrigin::of(false).words(300), "step 300");
        assert_eq!(StepOrigin::of(true).words(92), "step 92 since attach");
        assert_eq!(StepOrigin::of(true).cell(92), "92+a");
        assert_eq!(StepOrigin::of(false).cell(92), "92");
        assert_eq!(StepOrigin::Attach.key(), "attach");
        for o in [StepOrigin::Job, StepOrigin::Attach] {
            assert_eq!(StepOrigin::from_key(o.key()), Some(o));
        }
        assert_eq!(StepOrigin::from_key("\u{1b}[2Jattach"), None);
        assert_eq!(
            (
                StepOrigin::Job.since_attach(),
                StepOrigin::Attach.since_attach()
            ),
            (0, 1)
        );
    }
}
