//! Reading a Prometheus server's HTTP query API (`/api/v1/query`, `/api/v1/query_range`),
//! read-only: only GETs, never the admin or write endpoints.
//!
//! The cost does not grow with the fleet: each refresh is two instant queries whatever the
//! number of nodes (`PRESENT`: every series the view reads, by one name matcher; `DOWN`:
//! targets whose last scrape failed), plus one (`DETAIL_NAMES`) while nodes are open on the
//! screen, for their targets only. The start adds one range query (`HISTORY`) that fills the
//! peaks' and OOM counters' recent past, so the first screen already knows which rank's peak
//! grows and when an OOM happened, and the screen's start one more (`CHARTS`) for the
//! charts' past, summed by the server per job and per target.

use super::answer::{Data, Labels, Point, Points, decode};
use super::http;
use super::series::Series;
use super::url::{Url, encode_component};
use crate::safe_fs::bounds::PROMETHEUS_ANSWER;
use std::time::Duration;

/// Every series the view reads, in one instant query. Only what is shown is asked for, to
/// keep the answer small (about 3 KB a rank): dcgm-exporter's MiB figures only for GPUs no
/// vramscope exporter gives in bytes, and vramscope's stale and lost marks only where set.
/// `or` matches series on their labels without the metric name, so each part gets a label
/// of its own (`part`), or a GPU's `DCGM_FI_DEV_FB_USED` would be taken for its
/// `DCGM_FI_DEV_GPU_UTIL` and dropped.
pub const PRESENT: &str = concat!(
    "{__name__=~\"DCGM_FI_DEV_GPU_UTIL|vramscope_gpu_memory_(used|total)_bytes",
    "|vramscope_snapshot_timestamp_seconds|vramscope_process_(running|step|steps_since_attach|allocator_",
    "(allocated_bytes|reserved_bytes|peak_bytes|ooms_total|oom_forecast_steps))\"}",
    " or label_replace({__name__=~\"DCGM_FI_DEV_FB_(USED|FREE|TOTAL)\"}",
    " unless on (instance, gpu) vramscope_gpu_memory_used_bytes, \"part\", \"fb\", \"\", \"\")",
    " or label_replace(vramscope_gpu_stale > 0, \"part\", \"stale\", \"\", \"\")",
    " or label_replace(vramscope_gpu_lost > 0, \"part\", \"lost\", \"\", \"\")"
);

/// GPU exporters (any target with a GPU series in the last 10 minutes) whose last scrape
/// failed.
const DOWN: &str = "group by (instance, hostname, Hostname) (last_over_time(DCGM_FI_DEV_GPU_UTIL[10m])) and on (instance) (up == 0)";

/// The families whose recent past the start reads.
const HISTORY_NAMES: &str =
    "vramscope_process_allocator_peak_bytes|vramscope_process_allocator_ooms_total";

/// The single-node screen's figures of a GPU, asked only for the targets of the nodes
/// shown open (and for all of them by `--once`/`--json`): one query whatever their number.
/// Both exporters spell them as dcgm-exporter does; the power limit has two spellings in
/// dcgm-exporter's counters file and vramscope serves the enforced one. Per-process GPU memory
/// (with `command` and `user`) is vramscope's only.
pub const DETAIL_NAMES: &str = concat!(
    "DCGM_FI_DEV_(GPU_TEMP|POWER_USAGE|ENFORCED_POWER_LIMIT|POWER_MGMT_LIMIT|SM_CLOCK|MEM_CLOCK)",
    "|vramscope_gpu_processes|vramscope_process_memory_used_bytes"
);

/// The charts' past, in one range query: per job the allocated and reserved totals, the
/// worst rank's reserved and the mean utilisation of its GPUs; per target the GPU memory
/// used and the mean utilisation. Each part carries a `part` label. Aggregated by the
/// server, so the answer is a few series per job and per target, not one per rank; the
/// same sums as `charts::record` makes of each refresh. A rank is a process series with a
/// `rank` or a job id, as the job view counts them; a job's GPUs are those where its ranks
/// publish allocator figures (one family, not every process family, keeps the query cheap),
/// each taken once however many of its ranks (and MIG instances) there are.
pub const CHARTS: &str = concat!(
    "label_replace(sum by (job_id, exported_job_id) (",
    "vramscope_process_allocator_allocated_bytes{rank!=\"\"}",
    " or vramscope_process_allocator_allocated_bytes{job_id!=\"\"}",
    " or vramscope_process_allocator_allocated_bytes{exported_job_id!=\"\"}",
    "), \"part\", \"job_alloc\", \"\", \"\")",
    " or label_replace(sum by (job_id, exported_job_id) (",
    "vramscope_process_allocator_reserved_bytes{rank!=\"\"}",
    " or vramscope_process_allocator_reserved_bytes{job_id!=\"\"}",
    " or vramscope_process_allocator_reserved_bytes{exported_job_id!=\"\"}",
    "), \"part\", \"job_reserved\", \"\", \"\")",
    " or label_replace(max by (job_id, exported_job_id) (",
    "vramscope_process_allocator_reserved_bytes{rank!=\"\"}",
    " or vramscope_process_allocator_reserved_bytes{job_id!=\"\"}",
    " or vramscope_process_allocator_reserved_bytes{exported_job_id!=\"\"}",
    "), \"part\", \"job_worst\", \"\", \"\")",
    " or label_replace(avg by (job_id, exported_job_id) (",
    "group by (instance, gpu, job_id, exported_job_id) (",
    "vramscope_process_allocator_allocated_bytes{rank!=\"\"}",
    " or vramscope_process_allocator_allocated_bytes{job_id!=\"\"}",
    " or vramscope_process_allocator_allocated_bytes{exported_job_id!=\"\"})",
    " * on (instance, gpu) group_left max by (instance, gpu) (DCGM_FI_DEV_GPU_UTIL)",
    "), \"part\", \"job_util\", \"\", \"\")",
    " or label_replace(sum by (instance) (vramscope_gpu_memory_used_bytes",
    " or (max by (instance, gpu) (DCGM_FI_DEV_FB_USED) * 1048576",
    " unless on (instance, gpu) vramscope_gpu_memory_used_bytes)",
    "), \"part\", \"node_used\", \"\", \"\")",
    " or label_replace(avg by (instance) (max by (instance, gpu) (DCGM_FI_DEV_GPU_UTIL)),",
    " \"part\", \"node_util\", \"\", \"\")"
);

/// The charts' past may take this many request deadlines: it holds nothing up.
const PAST_DEADLINES: u32 = 5;

/// How far back the start reads, and at what resolution.
pub const HISTORY_SPAN_S: u64 = 300;
pub const HISTORY_STEP_S: u64 = 5;

/// A Prometheus server.
#[derive(Clone, Debug)]
pub struct Prometheus {
    pub url: Url,
    pub deadline: Duration,
}

/// One series of the charts' past: its part (`job_alloc`, `node_used`...), the job or the
/// target it is of, and (Unix ms, value) points.
#[derive(Clone, Debug, PartialEq)]
pub struct ChartPast {
    pub part: String,
    /// The job id (`None`: ranks without one).
    pub job: Option<String>,
    pub instance: Option<String>,
    pub points: Vec<(u64, f64)>,
}

/// One range-query series: its labels and (Unix ms, value) points.
#[derive(Clone, Debug, PartialEq)]
pub struct Past {
    pub series: Series,
    pub points: Vec<(u64, f64)>,
}

impl Prometheus {
    /// Every series the view reads, as of now.
    pub async fn present(&self) -> Result<Vec<Series>, String> {
        self.instant(PRESENT).await
    }

    /// The GPU exporters whose last scrape failed, with their node's name where their
    /// series of the last 10 minutes gave one: not every failing target of the server, only
    /// those that served GPUs.
    pub async fn down(&self) -> Result<Vec<(String, Option<String>)>, String> {
        Ok(self
            .instant(DOWN)
            .await?
            .into_iter()
            .map(|s| {
                let node = super::normalise::host_label(&s).map(str::to_string);
                (s.instance, node)
            })
            .collect())
    }

    /// The peaks' and OOM counters' last `HISTORY_SPAN_S` seconds up to `now_ms`; the last
    /// point is at `now_ms` itself, so it holds what an instant query now would.
    pub async fn history(&self, now_ms: u64) -> Result<Vec<Past>, String> {
        let query = format!("{{__name__=~\"{HISTORY_NAMES}\"}}");
        let data = self.range(&query, now_ms, self.deadline).await?;
        Ok(data
            .result
            .0
            .into_iter()
            .filter_map(|r| {
                Some(Past {
                    points: points(&r.values),
                    series: series(r.metric)?,
                })
            })
            .collect())
    }

    /// The single-node screen's figures of `instances`' GPUs (all when `None`).
    pub async fn detail(&self, instances: Option<&[String]>) -> Result<Vec<Series>, String> {
        let only = match instances {
            None => String::new(),
            Some(list) => {
                let alternatives: Vec<String> = list.iter().map(|i| regex_quote(i)).collect();
                format!(", instance=~{}", promql_string(&alternatives.join("|")))
            }
        };
        self.instant(&format!("{{__name__=~\"{DETAIL_NAMES}\"{only}}}"))
            .await
    }

    /// The charts' last `HISTORY_SPAN_S` seconds up to `now_ms` (`CHARTS`). Asked after the
    /// first screen, holding nothing up, so it is allowed `PAST_DEADLINES` deadlines.
    pub async fn chart_history(&self, now_ms: u64) -> Result<Vec<ChartPast>, String> {
        let data = self
            .range(CHARTS, now_ms, self.deadline * PAST_DEADLINES)
            .await?;
        Ok(data
            .result
            .0
            .into_iter()
            .filter_map(|r| {
                let mut part = None;
                let mut job = None;
                let mut instance = None;
                for (k, v) in r.metric.0 {
                    let v = super::series::clean(v);
                    match k.as_str() {
                        "part" => part = Some(v),
                        "job_id" | "exported_job_id" if !v.is_empty() => {
                            job.get_or_insert(v);
                        }
                        "instance" => instance = Some(v),
                        _ => {}
                    }
                }
                Some(ChartPast {
                    part: part?,
                    job,
                    instance,
                    points: points(&r.values),
                })
            })
            .collect())
    }

    /// A range query over the last `HISTORY_SPAN_S` seconds up to `now_ms`; its last point
    /// is at `now_ms` itself.
    async fn range(&self, query: &str, now_ms: u64, deadline: Duration) -> Result<Data, String> {
        let end = format!("{}.{:03}", now_ms / 1000, now_ms % 1000);
        let start = format!(
            "{}.{:03}",
            (now_ms / 1000).saturating_sub(HISTORY_SPAN_S),
            now_ms % 1000
        );
        let path = format!(
            "{}/api/v1/query_range?query={}&start={start}&end={end}&step={HISTORY_STEP_S}",
            self.url.path,
            encode_component(query)
        );
        let data = self.call(&path, deadline).await?;
        if data.result_type != "matrix" {
            return Err(format!("a range query answered a {}", data.result_type));
        }
        Ok(data)
    }

    async fn instant(&self, query: &str) -> Result<Vec<Series>, String> {
        let path = format!(
            "{}/api/v1/query?query={}",
            self.url.path,
            encode_component(query)
        );
        let data = self.call(&path, self.deadline).await?;
        if data.result_type != "vector" {
            return Err(format!("an instant query answered a {}", data.result_type));
        }
        Ok(data
            .result
            .0
            .into_iter()
            .filter_map(|r| {
                let value = r.value?.1.0?;
                let mut s = series(r.metric)?;
                s.value = value;
                Some(s)
            })
            .collect())
    }

    async fn call(&self, path: &str, deadline: Duration) -> Result<Data, String> {
        let body = http::get(
            &self.url,
            path,
            "application/json",
            deadline,
            PROMETHEUS_ANSWER,
        )
        .await?;
        decode(&body)
    }
}

/// A range result's points in Unix ms; values that are not numbers are left out.
fn points(values: &Points) -> Vec<(u64, f64)> {
    values
        .0
        .iter()
        .filter_map(|Point(t, v)| Some(((t * 1000.0) as u64, v.0?)))
        .collect()
}

/// `text` matched literally in a regular expression (RE2's metacharacters escaped, as
/// Go's `regexp.QuoteMeta` does).
fn regex_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `text` as a PromQL double-quoted string.
fn promql_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A result's labels as a `Series` (value 0 until set); `None` without an instance, which
/// every scraped series has.
fn series(metric: Labels) -> Option<Series> {
    let mut name = String::new();
    let mut instance = None;
    let mut labels = Vec::with_capacity(metric.0.len());
    for (k, v) in metric.0 {
        match k.as_str() {
            "__name__" => name = v,
            "instance" => instance = Some(v),
            _ => labels.push((k, v)),
        }
    }
    Some(Series::new(&name, labels, 0.0, &instance?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decoded_series_takes_its_name_and_instance_from_the_labels() {
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"__name__":"DCGM_FI_DEV_FB_USED","instance":"n:9400","gpu":"0","Hostname":"a"},"value":[1700000000.5,"1024"]}]}}"#;
        let data = decode(body).unwrap();
        let s = series(data.result.0.into_iter().next().unwrap().metric).unwrap();
        assert_eq!(
            (s.name.as_str(), s.instance.as_str()),
            ("DCGM_FI_DEV_FB_USED", "n:9400")
        );
        assert_eq!(s.label("Hostname"), Some("a"));
        assert_eq!(s.label("instance"), None);
    }

    #[test]
    fn instances_are_matched_literally_in_a_safe_promql_string() {
        let quoted = regex_quote("10.0.0.1:9400");
        assert_eq!(quoted, r"10\.0\.0\.1:9400");
        assert_eq!(promql_string(&quoted), r#""10\\.0\\.0\\.1:9400""#);
        // A hostile name cannot close the string or add a matcher.
        let hostile = promql_string(&regex_quote("a\"} or up{x=\"(.*)"));
        assert_eq!(hostile, r#""a\"\\} or up\\{x=\"\\(\\.\\*\\)""#);
    }
}
