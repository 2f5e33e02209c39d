//! Scraping exporters directly (`--targets`, `--targets-file`): vramscope's own and
//! dcgm-exporter's `/metrics`, each under its own deadline, at most `concurrency` at once,
//! so a target that hangs costs one slot for one deadline and the round still ends on time.

use super::exposition;
use super::http::{self, short};
use super::series::Series;
use super::url::Url;
use crate::safe_fs::bounds::{MAX_TARGETS, METRICS_PAGE, METRICS_PAGE_SAMPLES};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// The default port of a target written without one (dcgm-exporter's).
pub const DEFAULT_PORT: u16 = 9400;

/// The text format, as Prometheus asks for it; both exporters answer it.
const ACCEPT: &str = "text/plain;version=0.0.4;q=0.9,*/*;q=0.1";

/// One target's answer this round.
#[derive(Debug)]
pub struct Scraped {
    /// `host:port`, the target's `instance`.
    pub instance: String,
    pub result: Result<Vec<Series>, String>,
}

/// The targets and how to scrape them.
#[derive(Clone, Debug)]
pub struct Targets {
    pub targets: Arc<[Url]>,
    pub deadline: Duration,
    pub concurrency: usize,
}

impl Targets {
    /// `host:port`, `http://host:port[/path]` entries (the path defaults to `/metrics`),
    /// separated by commas, white space or lines; `#` starts a comment in a file.
    pub fn parse_list(text: &str) -> Result<Vec<Url>, String> {
        let mut urls = Vec::new();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("");
            for entry in line
                .split([',', ' ', '\t'])
                .filter(|e| !e.trim().is_empty())
            {
                let mut url = Url::parse(entry, DEFAULT_PORT)?;
                if url.path.is_empty() {
                    url.path = "/metrics".into();
                }
                if urls.len() == MAX_TARGETS {
                    return Err(format!(
                        "more than {MAX_TARGETS} targets (the most one list may name)"
                    ));
                }
                urls.push(url);
            }
        }
        if urls.is_empty() {
            return Err("no targets given".into());
        }
        Ok(urls)
    }

    /// Scrapes every target once; the answers come back in the targets' order.
    pub async fn round(&self, wanted: fn(&str) -> bool) -> Vec<Scraped> {
        let gate = Arc::new(Semaphore::new(self.concurrency.max(1)));
        let mut tasks = JoinSet::new();
        for (index, url) in self.targets.iter().enumerate() {
            let url = url.clone();
            let gate = Arc::clone(&gate);
            let deadline = self.deadline;
            tasks.spawn(async move {
                // The deadline starts once a slot is free: waiting is not the target's fault.
                let _slot = gate.acquire_owned().await;
                (index, scrape(&url, deadline, wanted).await)
            });
        }
        let mut results: Vec<Option<Scraped>> = self.targets.iter().map(|_| None).collect();
        while let Some(done) = tasks.join_next().await {
            if let Ok((index, scraped)) = done
                && let Some(slot) = results.get_mut(index)
            {
                *slot = Some(scraped);
            }
        }
        results
            .into_iter()
            .zip(self.targets.iter())
            .map(|(r, url)| {
                r.unwrap_or_else(|| Scraped {
                    instance: url.authority(),
                    result: Err("the scrape stopped unexpectedly".into()),
                })
            })
            .collect()
    }
}

async fn scrape(url: &Url, deadline: Duration, wanted: fn(&str) -> bool) -> Scraped {
    let instance = url.authority();
    let result = match http::get(url, &url.path, ACCEPT, deadline, METRICS_PAGE).await {
        Ok(body) => match std::str::from_utf8(&body) {
            Ok(text) => {
                let page = exposition::parse(text, &instance, wanted, METRICS_PAGE_SAMPLES);
                match page.refusal() {
                    Some(why) => Err(why),
                    None => Ok(page.series),
                }
            }
            Err(e) => Err(format!("not a metrics page: {}", short(&e.to_string()))),
        },
        Err(e) => Err(e),
    };
    Scraped { instance, result }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_lists_take_commas_lines_and_comments() {
        let urls = Targets::parse_list("a:9400, b\n# c:1\nhttp://d:8000/m  # d\n").unwrap();
        let shown: Vec<String> = urls
            .iter()
            .map(|u| format!("{}{}", u.authority(), u.path))
            .collect();
        assert_eq!(shown, ["a:9400/metrics", "b:9400/metrics", "d:8000/m"]);
        assert_eq!(
            Targets::parse_list(" # none\n").unwrap_err(),
            "no targets given"
        );
        assert!(Targets::parse_list("a:x").is_err());
    }

    #[test]
    fn a_list_of_more_targets_than_the_bound_is_refused() {
        let list = |n: usize| vec!["a:1"; n].join(",");
        assert_eq!(
            Targets::parse_list(&list(MAX_TARGETS)).unwrap().len(),
            MAX_TARGETS
        );
        assert_eq!(
            Targets::parse_list(&list(MAX_TARGETS + 1)).unwrap_err(),
            format!("more than {MAX_TARGETS} targets (the most one list may name)")
        );
    }
}
