//! One refresh's reading of the sources, and the thread that reads them every interval.
//! The fetcher owns a one-thread tokio runtime (the HTTP client's) and sends each refresh's
//! owned `Fetched` to the thread that owns the model; it never blocks that thread, so a
//! source that hangs leaves the screen live and saying so.

use super::prometheus::{ChartPast, Past, Prometheus};
use super::scrape::Targets;
use super::series::Series;
use super::ssh::Hosts;
use crate::model::figures::{Figure, device as gpu};
use crate::model::now_ms;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// Where the figures come from.
#[derive(Clone, Debug)]
pub enum Source {
    Prometheus(Prometheus),
    Targets(Targets),
    /// `--ssh`: hosts running `vramscope --json --loop` over ssh, each read as it sends.
    Ssh(Arc<Hosts>),
}

impl Source {
    /// How the view names it.
    pub fn describe(&self) -> String {
        match self {
            Source::Prometheus(p) => format!("Prometheus {}{}", p.url.authority(), p.url.path),
            Source::Targets(t) => format!(
                "{} target{} scraped directly",
                t.targets.len(),
                if t.targets.len() == 1 { "" } else { "s" }
            ),
            Source::Ssh(h) => format!(
                "{} host{} over ssh",
                h.len(),
                if h.len() == 1 { "" } else { "s" }
            ),
        }
    }
}

/// Who answered, or why not.
#[derive(Clone, Debug, PartialEq)]
pub enum Origin {
    Prometheus {
        problem: Option<String>,
    },
    Target {
        instance: String,
        problem: Option<String>,
    },
}

/// Whose single-node figures (`prometheus::DETAIL_NAMES`) a refresh reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Detail {
    /// Nobody's: no node is open.
    #[default]
    None,
    /// Every target's (`--once`, `--json`; a direct scrape reads whole pages anyway).
    All,
    /// These targets' (the nodes open on the screen).
    Of(Vec<String>),
}

impl Detail {
    pub fn covers(&self, instance: &str) -> bool {
        match self {
            Detail::None => false,
            Detail::All => true,
            Detail::Of(list) => list.iter().any(|i| i == instance),
        }
    }
}

/// What a refresh asks besides the present.
#[derive(Clone, Debug, Default)]
pub struct Ask {
    /// The start's recent past of peaks and OOM counters.
    pub history: bool,
    pub detail: Detail,
}

/// One refresh's answers.
#[derive(Debug, Default)]
pub struct Fetched {
    /// When the refresh began (Unix ms).
    pub at_ms: u64,
    pub series: Vec<Series>,
    pub origins: Vec<Origin>,
    /// Targets Prometheus says are down, with their node's name when known.
    pub down: Vec<(String, Option<String>)>,
    /// The recent past, read once at the start from Prometheus.
    pub history: Vec<Past>,
    /// Whose single-node figures the series hold (what was asked, and answered).
    pub detail: Detail,
    /// Why the single-node figures asked for are not there.
    pub detail_problem: Option<String>,
    /// HTTP requests made.
    pub requests: u32,
    /// How long the refresh took.
    pub took: Duration,
}

/// Reads `source` once, with what `ask` adds.
pub async fn fetch(source: &Source, ask: &Ask) -> Fetched {
    let started = Instant::now();
    let at_ms = now_ms();
    let mut fetched = Fetched {
        at_ms,
        ..Fetched::default()
    };
    match source {
        Source::Prometheus(prometheus) => {
            let history = async {
                if ask.history {
                    Some(prometheus.history(at_ms).await)
                } else {
                    None
                }
            };
            let detail = async {
                match &ask.detail {
                    Detail::None => None,
                    Detail::All => Some(prometheus.detail(None).await),
                    Detail::Of(list) => Some(prometheus.detail(Some(list)).await),
                }
            };
            let (present, down, history, detail) =
                tokio::join!(prometheus.present(), prometheus.down(), history, detail);
            fetched.requests = 2 + u32::from(ask.history) + u32::from(ask.detail != Detail::None);
            match present {
                Ok(series) => {
                    fetched.series = series;
                    fetched.origins.push(Origin::Prometheus { problem: None });
                }
                Err(problem) => fetched.origins.push(Origin::Prometheus {
                    problem: Some(problem),
                }),
            }
            // Without these the view only knows less: no down marks, no past.
            fetched.down = down.unwrap_or_default();
            fetched.history = history.and_then(Result::ok).unwrap_or_default();
            match detail {
                Some(Ok(series)) => {
                    fetched.series.extend(series);
                    fetched.detail = ask.detail.clone();
                }
                Some(Err(problem)) => fetched.detail_problem = Some(problem),
                None => {}
            }
        }
        Source::Targets(targets) => {
            fetched.requests = u32::try_from(targets.targets.len()).unwrap_or(u32::MAX);
            // Whole pages are read: every target's single-node figures come with them.
            fetched.detail = Detail::All;
            for scraped in targets.round(wanted).await {
                let problem = match scraped.result {
                    Ok(series) => {
                        fetched.series.extend(series);
                        None
                    }
                    Err(problem) => Some(problem),
                };
                fetched.origins.push(Origin::Target {
                    instance: scraped.instance,
                    problem,
                });
            }
        }
        Source::Ssh(hosts) => {
            // Each host's latest document: no request is made here, the sessions run on.
            fetched.detail = Detail::All;
            let (series, hosts) = hosts.round();
            fetched.series = series;
            fetched.origins = hosts
                .into_iter()
                .map(|(instance, problem)| Origin::Target { instance, problem })
                .collect();
        }
    }
    fetched.took = started.elapsed();
    fetched
}

/// The families a direct scrape keeps: those `prometheus::PRESENT` and
/// `prometheus::DETAIL_NAMES` ask Prometheus for, named by the figures `normalise` reads.
pub fn wanted(name: &str) -> bool {
    const READ: [&Figure; 12] = [
        &gpu::MEMORY_USED,
        &gpu::MEMORY_FREE,
        &gpu::MEMORY_TOTAL,
        &gpu::GPU_UTIL,
        &gpu::STALE,
        &gpu::LOST,
        &gpu::PROCESS_COUNT,
        // The single-node figures (`prometheus::DETAIL_NAMES`).
        &gpu::TEMPERATURE_C,
        &gpu::POWER_MW,
        &gpu::POWER_LIMIT_MW,
        &gpu::SM_CLOCK_MHZ,
        &gpu::MEM_CLOCK_MHZ,
    ];
    let named = Some(name);
    name == "vramscope_snapshot_timestamp_seconds"
        || name.starts_with("vramscope_process_")
        || READ
            .iter()
            .any(|f| f.family == named || f.dcgm == named || f.dcgm_default == named)
}

/// A one-thread runtime for the HTTP client.
pub fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(|e| format!("cannot start the HTTP client: {e}"))
}

/// How the fetcher's two kinds of message become the receiver's events.
pub type Wraps<E> = (fn(Fetched) -> E, fn(ChartsPast) -> E);

/// The charts' past from Prometheus's range query, asked at `at_ms` (Unix ms).
#[derive(Debug)]
pub struct ChartsPast {
    pub at_ms: u64,
    /// Why there is none when the query failed: the charts then fill from the refreshes
    /// only.
    pub past: Result<Vec<ChartPast>, String>,
}

/// Starts the fetcher: a refresh every `interval` (the next starts `interval` after the
/// previous began, or at once if it took longer: every request has its deadline, so a
/// refresh ends), each sent on `tx` as `wrap(fetched)`. The first reads the recent past
/// too; right after it is sent, Prometheus's range query for the charts' past is asked (on
/// a thread of its own) and sent as `wrap_past(past)`, so it never holds up the first
/// screen or the refreshes. Each refresh reads the
/// single-node figures of the targets `open` lists then (the nodes the screen shows open).
/// It ends when the receiver is gone.
pub fn spawn<E: Send + 'static>(
    source: Source,
    interval: Duration,
    open: Arc<Mutex<Vec<String>>>,
    tx: Sender<E>,
    (wrap, wrap_past): Wraps<E>,
) -> Result<(), String> {
    let runtime = runtime()?;
    thread::Builder::new()
        .name("cluster-fetch".into())
        .spawn(move || {
            let mut first = true;
            loop {
                let began = Instant::now();
                let open = open.lock().map(|o| o.clone()).unwrap_or_default();
                let ask = Ask {
                    history: first,
                    detail: if open.is_empty() {
                        Detail::None
                    } else {
                        Detail::Of(open)
                    },
                };
                let fetched = runtime.block_on(fetch(&source, &ask));
                if tx.send(wrap(fetched)).is_err() {
                    return;
                }
                if first && let Source::Prometheus(prometheus) = &source {
                    // On a thread of its own, so a slow answer (seconds, for thousands of
                    // ranks) does not hold up the refreshes.
                    let prometheus = prometheus.clone();
                    let tx = tx.clone();
                    let _ = thread::Builder::new()
                        .name("cluster-past".into())
                        .spawn(move || {
                            let at_ms = now_ms();
                            let past = match self::runtime() {
                                Ok(r) => r.block_on(prometheus.chart_history(at_ms)),
                                Err(why) => Err(why),
                            };
                            let _ = tx.send(wrap_past(ChartsPast { at_ms, past }));
                        });
                }
                first = false;
                thread::sleep(interval.saturating_sub(began.elapsed()));
            }
        })
        .map(|_| ())
        .map_err(|e| format!("cannot start the fetching thread: {e}"))
}

#[cfg(test)]
mod tests {
    use super::wanted;

    /// A direct scrape keeps the families the cluster's model reads, under both exporters'
    /// names, and drops the rest of a page (a dcgm-exporter page has dozens).
    #[test]
    fn a_scrape_keeps_what_the_model_reads() {
        for kept in [
            "DCGM_FI_DEV_FB_USED",
            "DCGM_FI_DEV_FB_FREE",
            "DCGM_FI_DEV_POWER_MGMT_LIMIT",
            "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
            "vramscope_gpu_memory_used_bytes",
            "vramscope_gpu_stale",
            "vramscope_gpu_processes",
            "vramscope_process_allocator_ooms_total",
            "vramscope_snapshot_timestamp_seconds",
        ] {
            assert!(wanted(kept), "{kept}");
        }
        for dropped in [
            "DCGM_FI_DEV_FAN_SPEED",
            "DCGM_FI_DEV_PSTATE",
            "vramscope_gpu_ecc_corrected_errors_total",
            "vramscope_build_info",
        ] {
            assert!(!wanted(dropped), "{dropped}");
        }
    }
}
