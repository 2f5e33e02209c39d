//! Foresight: from one writer slot's per-step peaks, whether an out-of-memory error is coming
//! and in how many steps, or whether the peaks leak, or nothing at all.
//!
//! The input is the `peak_allocated` of each `STEP_END` event with its step number and time,
//! not NVML's used memory: the caching allocator keeps freed blocks, so NVML (which sees
//! reserved memory) grows in jumps and then stays flat, and a slope on it either says nothing
//! until the reservation jumps or fires on harmless cache growth. The step peak is the most
//! memory live tensors needed during the step, which is what has to fit.
//!
//! The principle, taken from vramtop's predictor: **silence rather than noise**. A false alarm
//! teaches people to ignore the line, so a forecast is made only when every gate passes:
//!
//! 1. **Warm-up is ignored.** Steps numbered below [`WARMUP_STEPS`] are left out (the first
//!    steps allocate gradients and optimizer state once), and so is any leading run of points
//!    that sits off the line the rest follows (a longer ramp, or the flat stretch before a
//!    leak began). Only the trailing run of ascending step numbers counts, so a counter that
//!    restarts starts a new series.
//! 2. **Enough steps.** At least [`MIN_STEPS`] steps on the line: a slope from a handful of
//!    steps extrapolated thousands of steps ahead is a guess.
//! 3. **Robust to a spike.** The line is first fitted robustly (the median of slopes between
//!    points half the stretch apart, which one wild point can move by at most one pair);
//!    points further from it than [`OUTLIER_MADS`] robust deviations are set aside, and at most
//!    one in [`POINTS_PER_OUTLIER`] (always at least one) may be: more means the series is
//!    noisy. A spike set aside still counts once: the low end of the range allows for the
//!    highest excursion above the line recurring.
//! 4. **Rising, and by enough to matter.** A positive slope whose rise across the fitted steps
//!    is at least [`MIN_RISE_SHARE`] of the peak: below that the peaks are flat for any
//!    purpose, and allocation rounding must not read as a leak.
//! 5. **Residuals small relative to the slope.** The residuals' standard deviation must stay
//!    within [`NOISE_STEPS`] steps' worth of growth. Step peaks of a fixed-shape training loop
//!    repeat to the byte, so a real leak passes easily; variable shapes swamp a small trend,
//!    and then there is nothing confident to say. With at least [`MIN_STEPS`] steps this gate
//!    also holds the slope's standard error below a sixth of the slope, and pure noise cannot
//!    pass it by chance (it would need a slope over 6 standard errors from zero).
//! 6. **Near enough.** An OOM forecast further ahead than [`MAX_EXTRAPOLATION`] times the
//!    fitted span of steps is not made (the run will change before then); the trend is then a
//!    [`Forecast::Leak`], as it is when the memory the allocator may grow into is unknown.
//!
//! The whole window is tried first, then its recent half and quarter, so a leak that began
//! inside the window is seen once it fills a quarter of it rather than most of it; each
//! stretch passes the same gates.
//!
//! The steps count until the fitted step peak reaches the ceiling ([`Room::ceiling`]). Reserved
//! memory is never below allocated, so fragmentation of the cache can bring the OOM earlier,
//! never later, if the trend holds.
//!
//! Cost: [`foresee`] reads at most [`WINDOW`] peaks and does a fixed number of linear passes
//! and median selections over them: O(window) per call. [`StepPeaks`] keeps at most twice the
//! window.

use super::allocator_stream::{AllocatorEvent, EventKind};
use super::units::bytes;
use serde::Serialize;

/// How many of the most recent step peaks a forecast reads.
pub const WINDOW: usize = 128;
/// Steps numbered below this are warm-up (gradients and optimizer state allocated once).
pub const WARMUP_STEPS: u64 = 3;
/// The fewest steps on the fitted line before anything is said.
pub const MIN_STEPS: usize = 20;
/// A point further from the robust line than this many robust standard deviations (1.4826
/// median absolute deviations) is an outlier.
pub const OUTLIER_MADS: f64 = 5.0;
/// Below this distance from the line no point is an outlier: allocation rounding and small
/// buffers make step peaks differ by a few KiB even in a perfectly steady loop.
pub const OUTLIER_FLOOR_BYTES: f64 = 1024.0 * 1024.0;
/// At most one outlier per this many points (and always at least one may be set aside).
pub const POINTS_PER_OUTLIER: usize = 20;
/// The rise across the fitted steps must be at least this share of the latest fitted peak.
pub const MIN_RISE_SHARE: f64 = 0.01;
/// The residuals' standard deviation may be at most this many steps' worth of growth.
pub const NOISE_STEPS: f64 = 4.0;
/// An OOM forecast may look at most this many times the fitted span of steps ahead.
pub const MAX_EXTRAPOLATION: f64 = 100.0;

/// The peak of allocated memory during one step, from its `STEP_END` event. A step whose peak
/// is absent is left out of the series, never entered as zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct StepPeak {
    pub step: u64,
    pub at_ms: u64,
    pub peak: u64,
}

impl StepPeak {
    /// The step peak a `STEP_END` event carries, when it has a step number and a peak (a
    /// writer with no device sends one with neither); which slot it belongs to is the
    /// caller's to check.
    pub fn from_event(event: &AllocatorEvent) -> Option<StepPeak> {
        let EventKind::StepEnd { peak_allocated, .. } = &event.kind else {
            return None;
        };
        Some(StepPeak {
            step: event.step?,
            at_ms: event.at_ms,
            peak: peak_allocated.clone().ok()?,
        })
    }
}

/// The memory a slot's allocator can grow into. Every figure is optional: absent ones are left
/// out of the ceiling, never taken as zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Room {
    /// The device's total memory.
    pub total: Option<u64>,
    /// The allocator's own limit (PyTorch's per-process memory fraction), when one is set.
    pub limit: Option<u64>,
    /// Device memory the process holds outside this allocator: NVML's used for the process
    /// minus the allocator's reserved (the CUDA context, libraries).
    pub outside: Option<u64>,
    /// The device's free memory (NVML's, else the framework's `cudaMemGetInfo`): what is left
    /// after every process, the allocators' caches and the driver's own reserve.
    pub free: Option<u64>,
    /// The bytes this allocator already holds from the driver, which it can hand out again.
    pub reserved: Option<u64>,
}

impl Room {
    /// The most the step peak can reach: the device's free memory plus what the allocator
    /// already holds, else the device total less what the process holds outside the
    /// allocator; the lowest of those and the limit that are known.
    pub fn ceiling(&self) -> Option<u64> {
        let reachable = self
            .free
            .zip(self.reserved)
            .map(|(f, r)| f.saturating_add(r));
        let total_less_outside = self
            .total
            .map(|total| total.saturating_sub(self.outside.unwrap_or(0)));
        [reachable, total_less_outside, self.limit]
            .into_iter()
            .flatten()
            .min()
    }
}

/// Why a forecast says nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum Silence {
    /// Not enough steps past warm-up on one line yet.
    TooFewSteps { have: usize, need: usize },
    /// The peaks are flat or falling, or rise by less than matters.
    NotRising,
    /// The peaks scatter too much around any line to extrapolate.
    Noisy,
    /// The process has ended (or can no longer be read): there is no future to forecast.
    Ended,
}

/// What the step peaks say about the future.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Forecast {
    /// The peaks rise steadily and will reach the ceiling in about `steps` steps.
    OomIn {
        steps: u64,
        /// The range of `steps`: two standard errors of the slope either way, and at the low
        /// end also the highest excursion above the line in the window (a spike) recurring.
        steps_low: u64,
        steps_high: u64,
        /// `steps` at the window's mean time per step; absent when the times do not advance.
        eta_ms: Option<u64>,
        bytes_per_step: f64,
        /// How many steps the fit stands on.
        fitted_steps: usize,
        /// The ceiling the forecast counts towards.
        ceiling: u64,
    },
    /// The peaks rise steadily, but the ceiling is unknown or far away.
    Leak {
        bytes_per_step: f64,
        fitted_steps: usize,
    },
    /// Nothing confident to say.
    Silent(Silence),
}

/// A slot's recent step peaks, bounded: it holds at most `2 * WINDOW` and drops the oldest
/// half at once, so a push is O(1) amortised and the window stays one contiguous slice.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StepPeaks {
    peaks: Vec<StepPeak>,
}

impl StepPeaks {
    pub fn push(&mut self, peak: StepPeak) {
        if self.peaks.len() >= 2 * WINDOW {
            self.peaks.drain(..self.peaks.len() - WINDOW);
        }
        self.peaks.push(peak);
    }

    /// How many peaks are held: at most `2 * WINDOW`.
    pub fn held(&self) -> usize {
        self.peaks.len()
    }

    /// The last `WINDOW` peaks, oldest first.
    pub fn recent(&self) -> &[StepPeak] {
        &self.peaks[self.peaks.len().saturating_sub(WINDOW)..]
    }

    pub fn foresee(&self, room: Room) -> Forecast {
        foresee(self.recent(), room)
    }
}

/// The forecast from `peaks` (oldest first; only the last [`WINDOW`] are read) and the room
/// the allocator has. See the module documentation for the gates.
pub fn foresee(peaks: &[StepPeak], room: Room) -> Forecast {
    let recent = &peaks[peaks.len().saturating_sub(WINDOW)..];
    let run: Vec<StepPeak> = ascending_tail(recent)
        .iter()
        .copied()
        .filter(|p| p.step >= WARMUP_STEPS)
        .collect();
    // The whole window first, then its recent half and quarter: a leak that began inside the
    // window bends the whole into a hockey stick that no line fits, and would otherwise stay
    // unseen until it filled most of the window. A shorter stretch passes the same gates, and
    // its shorter span also shortens how far ahead it may count.
    let mut silence = None;
    for len in [run.len(), run.len() / 2, run.len() / 4] {
        if len < MIN_STEPS && silence.is_some() {
            break;
        }
        let forecast = forecast_from(&run[run.len() - len..], room);
        if !matches!(forecast, Forecast::Silent(_)) {
            return forecast;
        }
        silence.get_or_insert(forecast);
    }
    silence.unwrap_or_else(|| too_few(run.len()))
}

/// The forecast from one stretch of ascending steps past warm-up.
fn forecast_from(run: &[StepPeak], room: Room) -> Forecast {
    if run.len() < MIN_STEPS {
        return too_few(run.len());
    }
    let Some(fit) = fit(run) else {
        return too_few(0);
    };
    if fit.points < MIN_STEPS {
        return too_few(fit.points);
    }
    if fit.outliers > ((fit.points + fit.outliers) / POINTS_PER_OUTLIER).max(1) {
        return Forecast::Silent(Silence::Noisy);
    }
    let slope = fit.line.slope;
    let latest = fit.line.at(fit.last_x);
    if slope <= 0.0 || slope * fit.span < MIN_RISE_SHARE * latest {
        return Forecast::Silent(Silence::NotRising);
    }
    if fit.residual_sd > NOISE_STEPS * slope {
        return Forecast::Silent(Silence::Noisy);
    }
    let leak = Forecast::Leak {
        bytes_per_step: slope,
        fitted_steps: fit.points,
    };
    let Some(ceiling) = room.ceiling() else {
        return leak;
    };
    let headroom = ceiling as f64 - latest;
    // A fitted peak at or above the ceiling contradicts the figures (the program would have
    // failed): the ceiling is wrong, so say only what the peaks say.
    if headroom <= 0.0 {
        return leak;
    }
    let steps = steps_to(headroom, slope);
    if steps as f64 > MAX_EXTRAPOLATION * fit.span {
        return leak;
    }
    let margin = 2.0 * fit.slope_se;
    let steps_low = steps_to((headroom - fit.highest_excursion).max(0.0), slope + margin);
    let steps_high = if slope > margin {
        steps_to(headroom, slope - margin)
    } else {
        u64::MAX
    };
    Forecast::OomIn {
        steps,
        steps_low,
        steps_high,
        eta_ms: fit.ms_per_step.map(|ms| (ms * steps as f64).round() as u64),
        bytes_per_step: slope,
        fitted_steps: fit.points,
        ceiling,
    }
}

impl Forecast {
    /// The forecast once the process no longer runs: no future. A rise its step peaks showed
    /// stays said as what they did (`Leak`), with no OOM to come; else `Silence::Ended`.
    pub fn once_ended(self) -> Forecast {
        match self {
            Forecast::OomIn {
                bytes_per_step,
                fitted_steps,
                ..
            }
            | Forecast::Leak {
                bytes_per_step,
                fitted_steps,
            } => Forecast::Leak {
                bytes_per_step,
                fitted_steps,
            },
            Forecast::Silent(_) => Forecast::Silent(Silence::Ended),
        }
    }
}

/// The forecast in words, or nothing when it is silent: `OOM in about 120 steps (4 min)`,
/// `step peaks rising 16.0 MiB/step`.
pub fn describe(forecast: &Forecast) -> Option<String> {
    match forecast {
        Forecast::OomIn { steps, eta_ms, .. } => {
            let steps = about(*steps);
            Some(match eta_ms {
                Some(ms) => format!("OOM in about {steps} steps ({})", approx_duration(*ms)),
                None => format!("OOM in about {steps} steps"),
            })
        }
        Forecast::Leak { bytes_per_step, .. } => Some(format!(
            "step peaks rising {}/step",
            bytes(bytes_per_step.round() as u64)
        )),
        Forecast::Silent(_) => None,
    }
}

fn too_few(have: usize) -> Forecast {
    Forecast::Silent(Silence::TooFewSteps {
        have,
        need: MIN_STEPS,
    })
}

/// Steps until a line rising `slope` per step covers `headroom`. The small tolerance keeps
/// float rounding of an exact quotient from adding a step.
fn steps_to(headroom: f64, slope: f64) -> u64 {
    let steps = headroom / slope;
    (steps - steps * 1e-9).ceil().max(1.0) as u64
}

/// The trailing run of strictly ascending step numbers: a counter that restarted (a new run in
/// the same process) begins a new series.
fn ascending_tail(peaks: &[StepPeak]) -> &[StepPeak] {
    let mut start = peaks.len().saturating_sub(1);
    while start > 0 && peaks[start - 1].step < peaks[start].step {
        start -= 1;
    }
    &peaks[start..]
}

/// `y = intercept + slope * x`, with x in steps since the run's first step.
#[derive(Clone, Copy, Debug)]
struct Line {
    intercept: f64,
    slope: f64,
}

impl Line {
    fn at(&self, x: f64) -> f64 {
        self.intercept + self.slope * x
    }
}

/// A least-squares line through the inliers, with what the gates need to know about it.
#[derive(Debug)]
struct Fit {
    line: Line,
    /// Inliers the line stands on.
    points: usize,
    /// Points set aside past the leading trim.
    outliers: usize,
    residual_sd: f64,
    slope_se: f64,
    /// The most any point past the leading trim lies above the line (spikes included).
    highest_excursion: f64,
    /// Steps between the first and last inlier.
    span: f64,
    /// The most recent step, where the headroom is measured.
    last_x: f64,
    ms_per_step: Option<f64>,
}

/// Trims the leading off-line run, sets outliers aside and fits the rest by least squares.
fn fit(run: &[StepPeak]) -> Option<Fit> {
    let first_step = run.first()?.step;
    let mut xs: Vec<f64> = run.iter().map(|p| (p.step - first_step) as f64).collect();
    let mut ys: Vec<f64> = run.iter().map(|p| p.peak as f64).collect();
    let mut times: Vec<u64> = run.iter().map(|p| p.at_ms).collect();
    let last_x = *xs.last()?;

    let mut scratch = Vec::with_capacity(xs.len());
    let mut line = robust_line(&xs, &ys, &mut scratch)?;
    let mut limit = outlier_limit(&xs, &ys, line, &mut scratch);
    let lead = xs
        .iter()
        .zip(&ys)
        .position(|(x, y)| (y - line.at(*x)).abs() <= limit)
        .unwrap_or(xs.len());
    if lead > 0 {
        xs.drain(..lead);
        ys.drain(..lead);
        times.drain(..lead);
        if xs.len() < MIN_STEPS {
            return Some(Fit {
                line,
                points: xs.len(),
                outliers: 0,
                residual_sd: 0.0,
                slope_se: 0.0,
                highest_excursion: 0.0,
                span: 0.0,
                last_x,
                ms_per_step: None,
            });
        }
        line = robust_line(&xs, &ys, &mut scratch)?;
        limit = outlier_limit(&xs, &ys, line, &mut scratch);
    }

    let keep: Vec<usize> = (0..xs.len())
        .filter(|&i| (ys[i] - line.at(xs[i])).abs() <= limit)
        .collect();
    let outliers = xs.len() - keep.len();
    let (first, last) = (*keep.first()?, *keep.last()?);
    let n = keep.len() as f64;
    let mean_x = keep.iter().map(|&i| xs[i]).sum::<f64>() / n;
    let mean_y = keep.iter().map(|&i| ys[i]).sum::<f64>() / n;
    let sxx: f64 = keep.iter().map(|&i| (xs[i] - mean_x).powi(2)).sum();
    let sxy: f64 = keep
        .iter()
        .map(|&i| (xs[i] - mean_x) * (ys[i] - mean_y))
        .sum();
    if sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    let ls = Line {
        intercept: mean_y - slope * mean_x,
        slope,
    };
    let sse: f64 = keep.iter().map(|&i| (ys[i] - ls.at(xs[i])).powi(2)).sum();
    let residual_sd = if keep.len() > 2 {
        (sse / (n - 2.0)).sqrt()
    } else {
        0.0
    };
    let highest_excursion = xs
        .iter()
        .zip(&ys)
        .map(|(x, y)| y - ls.at(*x))
        .fold(0.0, f64::max);
    let span = xs[last] - xs[first];
    let elapsed = times[last].checked_sub(times[first]).filter(|&ms| ms > 0);
    Some(Fit {
        line: ls,
        points: keep.len(),
        outliers,
        residual_sd,
        slope_se: residual_sd / sxx.sqrt(),
        highest_excursion,
        span,
        last_x,
        ms_per_step: elapsed.map(|ms| ms as f64 / span),
    })
}

/// A line one wild point cannot drag: the slope is the median of the slopes between points
/// half the series apart (each point belongs to one pair only), the intercept the median of
/// what is left.
fn robust_line(xs: &[f64], ys: &[f64], scratch: &mut Vec<f64>) -> Option<Line> {
    let half = xs.len() / 2;
    scratch.clear();
    scratch.extend(
        (0..xs.len() - half)
            .filter(|&i| i + half < xs.len() && xs[i + half] > xs[i])
            .map(|i| (ys[i + half] - ys[i]) / (xs[i + half] - xs[i])),
    );
    let slope = median(scratch)?;
    scratch.clear();
    scratch.extend(xs.iter().zip(ys).map(|(x, y)| y - slope * x));
    let intercept = median(scratch)?;
    Some(Line { intercept, slope })
}

/// How far from `line` a point may lie before it is an outlier: [`OUTLIER_MADS`] robust
/// standard deviations of the residuals, never less than the floor.
fn outlier_limit(xs: &[f64], ys: &[f64], line: Line, scratch: &mut Vec<f64>) -> f64 {
    scratch.clear();
    scratch.extend(xs.iter().zip(ys).map(|(x, y)| (y - line.at(*x)).abs()));
    let mad = median(scratch).unwrap_or(0.0);
    (OUTLIER_MADS * 1.4826 * mad).max(OUTLIER_FLOOR_BYTES)
}

/// The median, by selection (O(n)); reorders `values`.
fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let odd = values.len() % 2 == 1;
    let mid = values.len() / 2;
    let (below, upper, _) = values.select_nth_unstable_by(mid, f64::total_cmp);
    let upper = *upper;
    if odd {
        return Some(upper);
    }
    let lower = below.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((lower + upper) / 2.0)
}

/// Two significant digits from 100 on: "about 4400 steps" claims no more than the fit knows.
fn about(steps: u64) -> u64 {
    if steps < 100 {
        return steps;
    }
    let mut unit = 1;
    while steps / unit >= 100 {
        unit *= 10;
    }
    (steps + unit / 2) / unit * unit
}

/// `45 s`, `74 min`, `5.5 h`, `3.2 d`: a rough duration for an estimate.
fn approx_duration(ms: u64) -> String {
    let secs = ms as f64 / 1000.0;
    if secs < 90.0 {
        format!("{} s", secs.round().max(1.0))
    } else if secs < 90.0 * 60.0 {
        format!("{} min", (secs / 60.0).round())
    } else if secs < 48.0 * 3600.0 {
        one_decimal_below_ten(secs / 3600.0, "h")
    } else {
        one_decimal_below_ten(secs / 86_400.0, "d")
    }
}

fn one_decimal_below_ten(value: f64, unit: &str) -> String {
    if value < 10.0 {
        format!("{value:.1} {unit}")
    } else {
        format!("{value:.0} {unit}")
    }
}
