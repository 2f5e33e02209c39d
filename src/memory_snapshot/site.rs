//! Which frame of a stack is the allocation's site: the first, innermost first, that is
//! neither torch, nor Python's standard library, nor vramscope's own writer, nor native
//! code (`stacks="all"` puts the allocator's C++ frames innermost). A stack made only of
//! those is grouped under its innermost frame; a block without a stack under a named
//! stand-in.

use super::held::Site;
use super::snapshot::{Frame, Frames, Stack};
use super::walk::Live;

/// Grouping keys for blocks that have no frame to group by.
pub(crate) const NO_STACK: u32 = u32::MAX;
pub(crate) const BEFORE_HISTORY: u32 = u32::MAX - 1;

/// Whether a frame belongs to the machinery rather than to the program.
pub(crate) fn is_machinery(frame: &Frame) -> bool {
    let path = frame.filename.as_str();
    // <frozen importlib._bootstrap>, <string>, and C++ frames.
    if path.starts_with('<') || !path.ends_with(".py") {
        return true;
    }
    let parts: Vec<&str> = path.split(['/', '\\']).collect();
    if parts
        .iter()
        .any(|c| matches!(*c, "torch" | "functorch" | "torchgen"))
    {
        return true;
    }
    // vramscope's writer, installed or from the repository's python/ directory.
    if parts.len() >= 2 && parts[parts.len() - 2] == "vramscope" {
        return true;
    }
    // The standard library: under lib/python3.X/ and not in a site-packages below it.
    if let Some(i) = parts.iter().position(|c| is_python_lib(c)) {
        return !parts[i + 1..]
            .iter()
            .any(|c| *c == "site-packages" || *c == "dist-packages");
    }
    false
}

fn is_python_lib(component: &str) -> bool {
    component
        .strip_prefix("python")
        .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// Decides each distinct frame once.
pub(crate) struct SiteFinder<'f> {
    frames: &'f Frames,
    machinery: Vec<Option<bool>>,
    /// Whether the device has a history at all: without one, no block has a stack and
    /// none is "before" anything.
    history: bool,
}

impl<'f> SiteFinder<'f> {
    pub fn new(frames: &'f Frames, history: bool) -> Self {
        SiteFinder {
            frames,
            machinery: vec![None; frames.distinct()],
            history,
        }
    }

    /// The grouping key of a stack: a frame id, or `NO_STACK`.
    pub fn key(&mut self, stack: Stack) -> u32 {
        let ids = self.frames.ids(stack);
        for &id in ids {
            let known = self.machinery.get(id as usize).copied().flatten();
            let machinery = match known {
                Some(m) => m,
                None => {
                    let m = self.frames.frame(id).is_none_or(is_machinery);
                    if let Some(slot) = self.machinery.get_mut(id as usize) {
                        *slot = Some(m);
                    }
                    m
                }
            };
            if !machinery {
                return id;
            }
        }
        ids.first().copied().unwrap_or(NO_STACK)
    }

    /// The key of a live block.
    pub fn key_of(&mut self, live: &Live) -> u32 {
        if live.stack.is_empty() && !live.traced && self.history {
            return BEFORE_HISTORY;
        }
        self.key(live.stack)
    }

    /// A site for a key, with no bytes yet.
    pub fn site(&self, key: u32) -> Site {
        match key {
            NO_STACK => stand_in("<no stack recorded>"),
            BEFORE_HISTORY => stand_in("<allocated before the history>"),
            id => self
                .frames
                .frame(id)
                .map_or_else(|| stand_in("<no stack recorded>"), Site::at),
        }
    }
}

fn stand_in(what: &str) -> Site {
    Site {
        file: String::new(),
        line: 0,
        function: what.to_string(),
        bytes: 0,
        blocks: 0,
        share: 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(path: &str) -> Frame {
        Frame {
            filename: path.to_string(),
            line: 1,
            name: "f".to_string(),
        }
    }

    #[test]
    fn torch_the_standard_library_and_the_writer_are_machinery() {
        for path in [
            "/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py",
            "torch/_tensor.py",
            "/usr/lib/python3.11/contextlib.py",
            "<frozen importlib._bootstrap>",
            "/venv/lib/python3.12/site-packages/vramscope/_sites.py",
            "/home/u/vramscope/python/vramscope/writer.py",
            "/opt/conda/include/c10/cuda/CUDACachingAllocator.cpp",
            "",
        ] {
            assert!(is_machinery(&frame(path)), "{path}");
        }
        for path in [
            "/home/u/model.py",
            "train.py",
            "/venv/lib/python3.12/site-packages/transformers/modeling_llama.py",
            "/home/u/torchtitan/models/llama.py",
        ] {
            assert!(!is_machinery(&frame(path)), "{path}");
        }
    }
}
