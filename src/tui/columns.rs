//! Which process-table columns the person chose (`--columns`): a plain list of names, so a
//! configuration file can set the same value. PID, VRAM and COMMAND always show; RANK and the
//! allocator columns come with the data that fills them; POD, when chosen (it is by default),
//! only while some process runs in a Kubernetes pod, so a machine without pods loses no room.
use crate::model::figures::process;

/// Columns of the process table, in display order. `s` cycles through them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SortColumn {
    Pid,
    User,
    Gpu,
    /// NVML's list: C, G or C+G (`--columns`).
    Type,
    /// The writer's rank, shown only while some writer reports one.
    Rank,
    #[default]
    Vram,
    VramPeak,
    Sm,
    HostRss,
    /// Host RSS as a share of the host's RAM (`--columns`).
    HostMem,
    Cpu,
    /// Time since the process started (`--columns`).
    Elapsed,
    /// Allocator figures, shown only while some process is instrumented.
    Allocated,
    Reserved,
    AllocPeak,
    Step,
    /// The Kubernetes pod (`namespace/pod:container`), shown while some process runs in one.
    Pod,
    Command,
}

impl SortColumn {
    pub const ALL: [SortColumn; 18] = [
        SortColumn::Pid,
        SortColumn::User,
        SortColumn::Gpu,
        SortColumn::Rank,
        SortColumn::Type,
        SortColumn::Vram,
        SortColumn::VramPeak,
        SortColumn::Sm,
        SortColumn::HostRss,
        SortColumn::HostMem,
        SortColumn::Cpu,
        SortColumn::Elapsed,
        SortColumn::Allocated,
        SortColumn::Reserved,
        SortColumn::AllocPeak,
        SortColumn::Step,
        SortColumn::Pod,
        SortColumn::Command,
    ];

    /// The next column to sort by among those on screen.
    pub fn next(self, on_screen: impl Fn(SortColumn) -> bool) -> Self {
        let at = Self::ALL.iter().position(|c| *c == self).unwrap_or(0);
        (1..=Self::ALL.len())
            .map(|step| Self::ALL[(at + step) % Self::ALL.len()])
            .find(|c| on_screen(*c))
            .unwrap_or(self)
    }

    pub fn is_allocator(self) -> bool {
        matches!(
            self,
            SortColumn::Allocated | SortColumn::Reserved | SortColumn::AllocPeak | SortColumn::Step
        )
    }

    /// The header: the figure's label (`model::figures`), where the column is one.
    pub fn label(self) -> &'static str {
        match self {
            SortColumn::Pid => process::PID.label,
            SortColumn::User => process::USER.label,
            SortColumn::Gpu => process::GPU_INDEX.label,
            SortColumn::Type => process::TYPE.label,
            SortColumn::HostMem => "%MEM",
            SortColumn::Elapsed => "ELAPSED",
            SortColumn::Rank => "RANK",
            SortColumn::Vram => process::USED_MEMORY.label,
            SortColumn::VramPeak => process::USED_MEMORY_PEAK.label,
            SortColumn::Sm => process::SM_UTIL.label,
            SortColumn::HostRss => process::HOST_RSS.label,
            SortColumn::Cpu => process::CPU_PERCENT.label,
            SortColumn::Allocated => process::ALLOCATED.label,
            SortColumn::Reserved => process::RESERVED.label,
            SortColumn::AllocPeak => process::TRUE_PEAK.label,
            SortColumn::Step => process::STEP.label,
            SortColumn::Pod => process::POD.label,
            SortColumn::Command => process::COMMAND.label,
        }
    }

    /// Numbers read best largest first; names alphabetically.
    pub fn default_descending(self) -> bool {
        !matches!(
            self,
            SortColumn::Pid
                | SortColumn::User
                | SortColumn::Gpu
                | SortColumn::Type
                | SortColumn::Rank
                | SortColumn::Pod
                | SortColumn::Command
        )
    }
}

/// Every column `--columns` names, in the table's order, with its name on the command line.
pub const NAMES: [(&str, SortColumn); 13] = [
    ("pid", SortColumn::Pid),
    ("user", SortColumn::User),
    ("gpu", SortColumn::Gpu),
    ("type", SortColumn::Type),
    ("vram", SortColumn::Vram),
    ("peak", SortColumn::VramPeak),
    ("sm", SortColumn::Sm),
    ("rss", SortColumn::HostRss),
    ("mem", SortColumn::HostMem),
    ("cpu", SortColumn::Cpu),
    ("elapsed", SortColumn::Elapsed),
    ("pod", SortColumn::Pod),
    ("command", SortColumn::Command),
];

/// Shown unless `--columns` says otherwise.
const DEFAULT: [SortColumn; 7] = [
    SortColumn::User,
    SortColumn::Gpu,
    SortColumn::VramPeak,
    SortColumn::Sm,
    SortColumn::HostRss,
    SortColumn::Cpu,
    SortColumn::Pod,
];

/// The columns that always show, whatever was chosen.
const ALWAYS: [SortColumn; 3] = [SortColumn::Pid, SortColumn::Vram, SortColumn::Command];

/// The chosen columns, in any order (the table keeps its own).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnChoice(Vec<SortColumn>);

impl Default for ColumnChoice {
    fn default() -> Self {
        Self(DEFAULT.to_vec())
    }
}

impl ColumnChoice {
    /// Whether the table shows `column` (RANK and the allocator columns: whenever their data
    /// is there). With `every_column` (the `x` key), each column `--columns` can name shows.
    pub fn shows(&self, column: SortColumn, every_column: bool) -> bool {
        ALWAYS.contains(&column)
            || column == SortColumn::Rank
            || column.is_allocator()
            || every_column
            || self.0.contains(&column)
    }
}

/// `user,gpu,type,elapsed`: names from [`NAMES`], separated by commas; one that is not there
/// is named in the error with the list of those that are.
pub fn parse(text: &str) -> Result<ColumnChoice, String> {
    let mut chosen = Vec::new();
    for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        let found = NAMES
            .iter()
            .find(|(known, _)| known.eq_ignore_ascii_case(name))
            .map(|(_, column)| *column);
        match found {
            Some(column) => chosen.push(column),
            None => {
                let known: Vec<&str> = NAMES.iter().map(|(n, _)| *n).collect();
                return Err(format!(
                    "no column `{}` (columns: {})",
                    crate::text::clean(name),
                    known.join(", ")
                ));
            }
        }
    }
    Ok(ColumnChoice(chosen))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_chooses_columns_and_the_fixed_ones_always_show() {
        let choice = parse("type, ELAPSED,mem").unwrap();
        for shown in [
            SortColumn::Type,
            SortColumn::Elapsed,
            SortColumn::HostMem,
            SortColumn::Pid,
            SortColumn::Vram,
            SortColumn::Command,
        ] {
            assert!(choice.shows(shown, false), "{shown:?}");
        }
        assert!(!choice.shows(SortColumn::User, false));
        assert!(choice.shows(SortColumn::User, true), "x shows every column");
        assert!(!ColumnChoice::default().shows(SortColumn::Type, false));
        assert!(ColumnChoice::default().shows(SortColumn::Cpu, false));
        assert!(ColumnChoice::default().shows(SortColumn::Pod, false));
        assert!(
            !choice.shows(SortColumn::Pod, false),
            "named or not, like any other"
        );
        assert!(parse("pod").unwrap().shows(SortColumn::Pod, false));
    }

    #[test]
    fn a_bad_name_is_named_with_the_known_ones() {
        let err = parse("user,gpu-mem").unwrap_err();
        assert!(
            err.starts_with("no column `gpu-mem` (columns: pid, user, gpu"),
            "{err}"
        );
        let hostile = parse("\u{1b}[31mred").unwrap_err();
        assert!(!hostile.contains('\u{1b}'), "{hostile}");
    }
}
