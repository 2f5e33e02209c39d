//! The process filter the person types after `/`: words matched against pid, user, command,
//! container and Kubernetes pod (namespace, pod and container names, uid), and `gpu:N` words
//! that keep only the rows on GPU N.

/// A parsed filter. Several `gpu:` words keep rows on any of those GPUs; the text, when
/// there is some, must match too.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Filter {
    pub gpus: Vec<u32>,
    /// The rest of the filter, lowercased, its words joined by one space.
    pub text: String,
}

impl Filter {
    pub fn parse(typed: &str) -> Filter {
        let mut filter = Filter::default();
        let mut words: Vec<String> = Vec::new();
        for word in typed.split_whitespace() {
            let lower = word.to_lowercase();
            match lower.strip_prefix("gpu:").map(str::parse::<u32>) {
                Some(Ok(index)) => filter.gpus.push(index),
                // `gpu:x` is not a GPU: it stays text, and matches what contains it.
                _ => words.push(lower),
            }
        }
        filter.text = words.join(" ");
        filter
    }

    pub fn on_gpu(&self, gpu_index: u32) -> bool {
        self.gpus.is_empty() || self.gpus.contains(&gpu_index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_words_are_taken_out_and_the_rest_is_text() {
        let f = Filter::parse("  GPU:3 Train gpu:1 ");
        assert_eq!(f.gpus, vec![3, 1]);
        assert_eq!(f.text, "train");
        assert!(f.on_gpu(1) && f.on_gpu(3) && !f.on_gpu(0));
    }

    #[test]
    fn a_gpu_word_without_a_number_is_text() {
        let f = Filter::parse("gpu:x");
        assert!(f.gpus.is_empty());
        assert_eq!(f.text, "gpu:x");
        assert!(f.on_gpu(7));
    }
}
