//! The run's settings that change memory and that a recording does not carry as figures of
//! their own: the batch size and sequence length, read from the command line the writer
//! gave (`--batch-size 32`, `--seq_len=2048`, Hydra's `data.batch_size=32`), and the
//! allocator's configuration (`PYTORCH_CUDA_ALLOC_CONF`) split into its options, so a change
//! is named by option (`max_split_size_mb 512 -> 128`).

use std::collections::BTreeMap;

/// A setting read from a command line: its value, and the spelling it was given under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Knob {
    pub value: u64,
    pub spelled: String,
}

/// The batch size's spellings, as `plain` leaves them.
const BATCH: [&str; 8] = [
    "batch_size",
    "bs",
    "batch",
    "train_batch_size",
    "per_device_train_batch_size",
    "micro_batch_size",
    "global_batch_size",
    "per_gpu_train_batch_size",
];

/// The sequence length's spellings.
const SEQUENCE: [&str; 10] = [
    "seq_len",
    "seq_length",
    "sequence_length",
    "max_seq_len",
    "max_seq_length",
    "block_size",
    "context_length",
    "ctx_len",
    "max_length",
    "seqlen",
];

/// The batch size the command line gives, if it names one.
pub fn batch_size(command: &str) -> Option<Knob> {
    knob(command, &BATCH)
}

/// The sequence length the command line gives, if it names one.
pub fn sequence_length(command: &str) -> Option<Knob> {
    knob(command, &SEQUENCE)
}

/// An option's name as compared: lower case, leading dashes gone, `-` as `_`, and of a
/// dotted Hydra key (`data.batch_size`) the last part.
fn plain(name: &str) -> String {
    let name = name.trim_start_matches('-');
    let last = name.rsplit('.').next().unwrap_or(name);
    last.to_ascii_lowercase().replace('-', "_")
}

/// The first of `names` the command line sets to a whole number: `--name N`, `--name=N` or
/// `name=N`.
fn knob(command: &str, names: &[&str]) -> Option<Knob> {
    let words: Vec<&str> = command.split_whitespace().collect();
    for (i, word) in words.iter().enumerate() {
        let (name, value) = match word.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None if word.starts_with("--") => (*word, words.get(i + 1).copied()),
            None => continue,
        };
        if !names.contains(&plain(name).as_str()) {
            continue;
        }
        if let Some(value) = value.and_then(|v| v.parse::<u64>().ok()) {
            return Some(Knob {
                value,
                spelled: name.to_string(),
            });
        }
    }
    None
}

/// One option of the allocator's configuration that differs: its value in A and in B
/// (`None`: not set there).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OptionChange {
    pub option: String,
    pub before: Option<String>,
    pub after: Option<String>,
}

/// `expandable_segments:True,max_split_size_mb:512` as options; a part with no `:` is an
/// option with no value.
fn options(config: &str) -> BTreeMap<String, String> {
    config
        .split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(|part| match part.split_once(':') {
            Some((k, v)) => (k.trim().to_string(), v.trim().to_string()),
            None => (part.to_string(), String::new()),
        })
        .collect()
}

/// The options of two `PYTORCH_CUDA_ALLOC_CONF` values that differ, by option name.
pub fn allocator_changes(before: &str, after: &str) -> Vec<OptionChange> {
    let (a, b) = (options(before), options(after));
    let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter(|name| a.get(*name) != b.get(*name))
        .map(|name| OptionChange {
            option: name.clone(),
            before: a.get(name).cloned(),
            after: b.get(name).cloned(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_and_sequence_are_read_in_every_usual_spelling() {
        let k = |c: &str| batch_size(c).map(|k| k.value);
        assert_eq!(k("python train.py --batch-size 32 --lr 3e-4"), Some(32));
        assert_eq!(k("python train.py --batch_size=48"), Some(48));
        assert_eq!(k("python train.py data.batch_size=16"), Some(16));
        assert_eq!(
            k("torchrun train.py --per-device-train-batch-size 8"),
            Some(8)
        );
        assert_eq!(k("python train.py --batch-size auto"), None);
        assert_eq!(k("python train.py --lr 32"), None);
        assert_eq!(k("python train.py --batch-size"), None);
        let s = |c: &str| sequence_length(c).map(|k| (k.value, k.spelled));
        assert_eq!(
            s("python train.py --seq-len 2048"),
            Some((2048, "--seq-len".into()))
        );
        assert_eq!(
            s("python gpt.py --block_size=1024"),
            Some((1024, "--block_size".into()))
        );
    }

    #[test]
    fn allocator_options_that_differ_are_named_one_by_one() {
        let changes = allocator_changes(
            "expandable_segments:True,max_split_size_mb:512",
            "max_split_size_mb:128, expandable_segments:True,garbage_collection_threshold:0.8",
        );
        assert_eq!(
            changes,
            vec![
                OptionChange {
                    option: "garbage_collection_threshold".into(),
                    before: None,
                    after: Some("0.8".into()),
                },
                OptionChange {
                    option: "max_split_size_mb".into(),
                    before: Some("512".into()),
                    after: Some("128".into()),
                },
            ]
        );
        assert!(allocator_changes("a:1,b:2", "b:2,a:1").is_empty());
        assert!(allocator_changes("", "").is_empty());
    }
}
