//! Tests of `foresight` on real figures: a 16 MiB-per-step leak from 9 GiB toward 80 GiB,
//! spikes, noise, warm-up ramps, restarts and absent figures.

use super::foresight::*;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

/// Steps `steps` one second apart, with the peak `peak(step)`.
fn series(steps: std::ops::Range<u64>, mut peak: impl FnMut(u64) -> u64) -> Vec<StepPeak> {
    steps
        .map(|step| StepPeak {
            step,
            at_ms: 1_000_000 + step * 1000,
            peak: peak(step),
        })
        .collect()
}

/// Reproducible noise in [-amplitude, amplitude): a linear congruential generator, so a
/// failure replays exactly.
fn noise(amplitude: u64) -> impl FnMut() -> i64 {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    move || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let unit = (state >> 11) as f64 / (1u64 << 53) as f64;
        ((unit * 2.0 - 1.0) * amplitude as f64) as i64
    }
}

fn with_noise(mut peaks: Vec<StepPeak>, amplitude: u64) -> Vec<StepPeak> {
    let mut next = noise(amplitude);
    for p in &mut peaks {
        p.peak = p.peak.saturating_add_signed(next());
    }
    peaks
}

fn leak(step: u64) -> u64 {
    9 * GIB + 16 * MIB * step
}

fn on_80_gib() -> Room {
    Room {
        total: Some(80 * GIB),
        ..Room::default()
    }
}

fn oom_steps(forecast: &Forecast) -> (u64, u64, u64) {
    match forecast {
        Forecast::OomIn {
            steps,
            steps_low,
            steps_high,
            ..
        } => (*steps, *steps_low, *steps_high),
        other => panic!("expected an OOM forecast, got {other:?}"),
    }
}

#[test]
fn a_16_mib_leak_from_9_gib_reaches_80_gib_in_the_steps_arithmetic_gives() {
    // Steps 0..99: the last peak is 9 GiB + 99 * 16 MiB = 10,800 MiB; 81,920 MiB is
    // reached after (81,920 - 10,800) / 16 = 4,445 more steps, one second each.
    let forecast = foresee(&series(0..100, leak), on_80_gib());
    let Forecast::OomIn {
        steps,
        steps_low,
        steps_high,
        eta_ms,
        bytes_per_step,
        fitted_steps,
        ceiling,
    } = forecast
    else {
        panic!("expected an OOM forecast, got {forecast:?}");
    };
    assert_eq!(steps, 4445);
    assert_eq!(
        (steps_low, steps_high),
        (4445, 4445),
        "an exact line has no spread"
    );
    assert_eq!(eta_ms, Some(4_445_000));
    assert!((bytes_per_step - (16 * MIB) as f64).abs() < 1.0);
    assert_eq!(fitted_steps, 97, "steps 0, 1 and 2 are warm-up");
    assert_eq!(ceiling, 80 * GIB);
    assert_eq!(
        describe(&forecast).as_deref(),
        Some("OOM in about 4400 steps (74 min)")
    );
}

#[test]
fn a_leak_with_jitter_is_forecast_within_the_spread_of_its_slope() {
    // Peaks jitter by up to 2 MiB (uniform: sd 1.15 MiB). Over 97 steps the slope's
    // standard error is 1.15 MiB / sqrt(Sxx = 76,048) = 0.0042 MiB/step, 0.026 % of
    // 16 MiB: about 1.2 steps of 4,445 per standard error, and the intercept's error
    // (0.12 MiB) adds under 0.01 step. Ten steps is over eight standard errors.
    let forecast = foresee(&with_noise(series(0..100, leak), 2 * MIB), on_80_gib());
    let (steps, low, high) = oom_steps(&forecast);
    assert!(steps.abs_diff(4445) <= 10, "{steps} steps");
    assert!(low <= 4445 && 4445 <= high, "{low}..{high}");
    assert!(low < high, "jitter gives a spread");
}

#[test]
fn one_spike_in_a_leak_does_not_move_the_forecast_only_its_low_end() {
    let mut peaks = series(0..100, leak);
    peaks[60].peak += 3 * GIB;
    // Should the 3 GiB spike recur, the ceiling is 3,072 MiB nearer:
    // (71,120 - 3,072) / 16 = 4,253 steps.
    assert_eq!(oom_steps(&foresee(&peaks, on_80_gib())), (4445, 4253, 4445));
}

#[test]
fn a_flat_series_with_one_spike_stays_silent() {
    let mut peaks = series(0..100, |_| 9 * GIB);
    peaks[70].peak = 12 * GIB;
    assert_eq!(
        foresee(&peaks, on_80_gib()),
        Forecast::Silent(Silence::NotRising)
    );
    // Also when the spike is the latest step.
    let last = peaks.len() - 1;
    peaks[last].peak = 12 * GIB;
    assert_eq!(
        foresee(&peaks, on_80_gib()),
        Forecast::Silent(Silence::NotRising)
    );
    assert_eq!(describe(&foresee(&peaks, on_80_gib())), None);
}

#[test]
fn a_noisy_series_stays_silent_even_around_a_real_leak() {
    // Variable shapes: peaks scatter by up to 512 MiB.
    let flat = with_noise(series(0..128, |_| 9 * GIB), 512 * MIB);
    assert!(matches!(foresee(&flat, on_80_gib()), Forecast::Silent(_)));
    let leaking = with_noise(series(0..128, leak), 512 * MIB);
    assert_eq!(
        foresee(&leaking, on_80_gib()),
        Forecast::Silent(Silence::Noisy)
    );
}

#[test]
fn many_spikes_are_noise_not_a_trend() {
    // A spike every eighth step: more than one in twenty of every stretch tried.
    let mut peaks = series(0..100, leak);
    for p in peaks.iter_mut().step_by(8) {
        p.peak += 2 * GIB;
    }
    assert_eq!(
        foresee(&peaks, on_80_gib()),
        Forecast::Silent(Silence::Noisy)
    );
}

#[test]
fn a_warm_up_ramp_is_not_a_leak() {
    // The first ten steps climb from 1 GiB to 9 GiB (gradients, optimizer state, cache
    // and autotuning), then the loop is steady.
    let ramp = |step: u64| (1 + step.min(8)) * GIB;
    assert_eq!(
        foresee(&series(0..60, ramp), on_80_gib()),
        Forecast::Silent(Silence::NotRising)
    );
    // Only the ramp so far: too early to say anything.
    assert!(matches!(
        foresee(&series(0..12, ramp), on_80_gib()),
        Forecast::Silent(Silence::TooFewSteps { .. })
    ));
}

#[test]
fn a_ramp_before_a_leak_does_not_bend_the_forecast() {
    // Steps 0..9 ramp up to the same line the leak then follows exactly.
    let peaks = series(
        0..100,
        |step| if step < 10 { step * GIB } else { leak(step) },
    );
    let forecast = foresee(&peaks, on_80_gib());
    assert_eq!(oom_steps(&forecast).0, 4445);
    let Forecast::OomIn { fitted_steps, .. } = forecast else {
        unreachable!()
    };
    assert_eq!(fitted_steps, 90, "the ramp's steps are left out");
}

#[test]
fn too_few_steps_say_how_many_more_are_needed() {
    assert_eq!(
        foresee(&series(0..15, leak), on_80_gib()),
        Forecast::Silent(Silence::TooFewSteps { have: 12, need: 20 })
    );
    assert_eq!(
        foresee(&[], on_80_gib()),
        Forecast::Silent(Silence::TooFewSteps { have: 0, need: 20 })
    );
}

#[test]
fn falling_peaks_are_not_rising() {
    let peaks = series(0..60, |step| 20 * GIB - 16 * MIB * step);
    assert_eq!(
        foresee(&peaks, on_80_gib()),
        Forecast::Silent(Silence::NotRising)
    );
}

#[test]
fn a_rise_too_small_to_matter_is_not_a_leak() {
    // 512 bytes a step (a loss tensor kept per step) over 97 steps is 48 KiB of 9 GiB.
    let peaks = series(0..100, |step| 9 * GIB + 512 * step);
    assert_eq!(
        foresee(&peaks, on_80_gib()),
        Forecast::Silent(Silence::NotRising)
    );
}

#[test]
fn without_a_known_ceiling_a_steady_rise_is_a_leak() {
    let forecast = foresee(&series(0..100, leak), Room::default());
    assert!(matches!(
        forecast,
        Forecast::Leak {
            fitted_steps: 97,
            ..
        }
    ));
    assert_eq!(
        describe(&forecast).as_deref(),
        Some("step peaks rising 16.0 MiB/step")
    );
}

#[test]
fn a_ceiling_far_beyond_the_fitted_span_is_a_leak_not_a_countdown() {
    // 1 MiB a step toward 80 GiB from 9 GiB: 72,000 steps ahead of a 96-step fit.
    let peaks = series(0..100, |step| 9 * GIB + MIB * step);
    assert!(matches!(
        foresee(&peaks, on_80_gib()),
        Forecast::Leak { .. }
    ));
}

#[test]
fn the_ceiling_is_the_limit_or_the_total_less_what_is_outside() {
    let outside = Room {
        total: Some(80 * GIB),
        limit: None,
        outside: Some(2 * GIB),
        ..Room::default()
    };
    assert_eq!(outside.ceiling(), Some(78 * GIB));
    let limited = Room {
        limit: Some(40 * GIB),
        ..outside
    };
    assert_eq!(limited.ceiling(), Some(40 * GIB));
    let only_limit = Room {
        limit: Some(40 * GIB),
        ..Room::default()
    };
    assert_eq!(only_limit.ceiling(), Some(40 * GIB));
    assert_eq!(Room::default().ceiling(), None);
    // The outside figure shortens the countdown: 2 GiB at 16 MiB a step is 128 steps.
    assert_eq!(
        oom_steps(&foresee(&series(0..100, leak), outside)).0,
        4445 - 128
    );
}

#[test]
fn the_free_memory_and_the_allocator_s_own_cache_are_its_ceiling_when_both_are_known() {
    // A neighbour's 20 GiB and the driver's reserve leave 29.5 GiB free; with the 26 GiB the
    // allocator holds, its peak can reach 55.5 GiB, not the 76 the total less its own
    // outside memory would give.
    let room = Room {
        total: Some(80 * GIB),
        limit: None,
        outside: Some(4 * GIB),
        free: Some(29 * GIB + GIB / 2),
        reserved: Some(26 * GIB),
    };
    assert_eq!(room.ceiling(), Some(55 * GIB + GIB / 2));
    // The free figure alone says nothing of the cache: the total's rule stands.
    let free_only = Room {
        reserved: None,
        ..room
    };
    assert_eq!(free_only.ceiling(), Some(76 * GIB));
    let limited = Room {
        limit: Some(40 * GIB),
        ..room
    };
    assert_eq!(limited.ceiling(), Some(40 * GIB));
}

#[test]
fn a_ceiling_below_the_fitted_peak_contradicts_the_figures_and_gives_no_countdown() {
    let room = Room {
        total: Some(8 * GIB),
        ..Room::default()
    };
    assert!(matches!(
        foresee(&series(0..100, leak), room),
        Forecast::Leak { .. }
    ));
}

#[test]
fn a_restarted_step_counter_starts_a_new_series() {
    // An old run leaked; the new one (steps from 0 again) is flat.
    let mut peaks = series(0..80, leak);
    peaks.extend(series(0..40, |_| 9 * GIB));
    assert_eq!(
        foresee(&peaks, on_80_gib()),
        Forecast::Silent(Silence::NotRising)
    );
}

#[test]
fn only_the_last_window_is_read_and_kept() {
    // A leak long ago, then a window's worth of flat steps: the leak is out of sight.
    let mut peaks = StepPeaks::default();
    for p in series(
        0..1000,
        |step| if step < 700 { leak(step) } else { 30 * GIB },
    ) {
        peaks.push(p);
    }
    assert!(peaks.held() <= 2 * WINDOW);
    assert_eq!(peaks.recent().len(), WINDOW);
    assert_eq!(peaks.recent().last().map(|p| p.step), Some(999));
    assert_eq!(
        peaks.foresee(on_80_gib()),
        Forecast::Silent(Silence::NotRising)
    );
}

#[test]
fn a_leak_that_begins_inside_the_window_is_seen_on_the_recent_steps() {
    // Flat at 9 GiB until step 60, then 16 MiB a step.
    let later = |step: u64| 9 * GIB + 16 * MIB * step.saturating_sub(60);
    // By step 99 the recent half (steps 51..99) shows the leak exactly, from step 60 on:
    // 40 steps, too short a span to count 4,500 steps ahead.
    assert_eq!(
        foresee(&series(0..100, later), on_80_gib()),
        Forecast::Leak {
            bytes_per_step: (16 * MIB) as f64,
            fitted_steps: 40
        }
    );
    // By step 109 the span (49 steps) is long enough: the last peak is 9 GiB + 49 *
    // 16 MiB = 10,000 MiB, and (81,920 - 10,000) / 16 = 4,495 steps remain.
    assert_eq!(
        oom_steps(&foresee(&series(0..110, later), on_80_gib())),
        (4495, 4495, 4495)
    );
}

#[test]
fn times_that_do_not_advance_give_no_eta() {
    let mut peaks = series(0..100, leak);
    for p in &mut peaks {
        p.at_ms = 5;
    }
    let forecast = foresee(&peaks, on_80_gib());
    assert!(matches!(forecast, Forecast::OomIn { eta_ms: None, .. }));
    assert_eq!(
        describe(&forecast).as_deref(),
        Some("OOM in about 4400 steps")
    );
}

fn oom_in(steps: u64, eta_ms: Option<u64>) -> Forecast {
    Forecast::OomIn {
        steps,
        steps_low: steps,
        steps_high: steps,
        eta_ms,
        bytes_per_step: (16 * MIB) as f64,
        fitted_steps: 40,
        ceiling: 80 * GIB,
    }
}

#[test]
fn words_round_the_estimate_to_what_the_fit_knows() {
    let said = |steps, ms| describe(&oom_in(steps, Some(ms)));
    assert_eq!(
        said(87, 45_400).as_deref(),
        Some("OOM in about 87 steps (45 s)")
    );
    assert_eq!(
        said(120, 240_000).as_deref(),
        Some("OOM in about 120 steps (4 min)")
    );
    assert_eq!(
        said(125, 250_000).as_deref(),
        Some("OOM in about 130 steps (4 min)")
    );
    assert_eq!(
        said(71_680, 5 * 3_600_000 + 1_800_000).as_deref(),
        Some("OOM in about 72000 steps (5.5 h)")
    );
    assert_eq!(
        said(9_000, 30 * 3_600_000).as_deref(),
        Some("OOM in about 9000 steps (30 h)")
    );
    assert_eq!(
        said(9_000, 3 * 86_400_000).as_deref(),
        Some("OOM in about 9000 steps (3.0 d)")
    );
    assert_eq!(
        describe(&Forecast::Leak {
            bytes_per_step: 1536.4,
            fitted_steps: 20
        })
        .as_deref(),
        Some("step peaks rising 1.50 KiB/step")
    );
    assert_eq!(describe(&Forecast::Silent(Silence::Noisy)), None);
}

#[test]
fn json_names_the_kind_and_the_reason_for_silence() {
    let json = |f: &Forecast| serde_json::to_value(f).map(|v| v.to_string()).unwrap();
    assert_eq!(
        json(&Forecast::Silent(Silence::TooFewSteps {
            have: 3,
            need: 20
        })),
        r#"{"have":3,"kind":"silent","need":20,"reason":"too_few_steps"}"#
    );
    assert_eq!(
        json(&Forecast::Silent(Silence::Noisy)),
        r#"{"kind":"silent","reason":"noisy"}"#
    );
    assert_eq!(
        json(&oom_in(120, None)),
        r#"{"bytes_per_step":16777216.0,"ceiling":85899345920,"eta_ms":null,"fitted_steps":40,"kind":"oom_in","steps":120,"steps_high":120,"steps_low":120}"#
    );
}

#[test]
fn a_step_end_event_gives_its_peak_and_an_event_without_one_none() {
    use crate::model::absent::Absent;
    use crate::model::allocator::{AllocatorEvent, EventKind};
    let step_end = |step, peak_allocated| AllocatorEvent {
        at_ms: 7_000,
        kind: EventKind::StepEnd {
            peak_allocated,
            peak_reserved: Ok(10 * GIB),
            duration_ns: Ok(1_000_000),
        },
        slot: Some(0),
        step,
        label: String::new(),
        phase: String::new(),
    };
    assert_eq!(
        StepPeak::from_event(&step_end(Some(40), Ok(9 * GIB))),
        Some(StepPeak {
            step: 40,
            at_ms: 7_000,
            peak: 9 * GIB
        })
    );
    assert_eq!(
        StepPeak::from_event(&step_end(Some(40), Err(Absent::NotAvailable))),
        None
    );
    assert_eq!(StepPeak::from_event(&step_end(None, Ok(9 * GIB))), None);
    let mark = AllocatorEvent {
        kind: EventKind::Mark,
        ..step_end(Some(40), Ok(9 * GIB))
    };
    assert_eq!(StepPeak::from_event(&mark), None);
}

mod hostile {
    use super::*;
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestCaseError, TestRunner};

    fn peak() -> impl Strategy<Value = StepPeak> {
        (
            0u64..400,
            any::<u64>(),
            prop_oneof![any::<u64>(), 0u64..(96 * GIB)],
        )
            .prop_map(|(step, at_ms, peak)| StepPeak { step, at_ms, peak })
    }

    fn room() -> impl Strategy<Value = Room> {
        let figure = || proptest::option::of(prop_oneof![any::<u64>(), 0u64..(96 * GIB)]);
        (figure(), figure(), figure(), figure(), figure()).prop_map(
            |(total, limit, outside, free, reserved)| Room {
                total,
                limit,
                outside,
                free,
                reserved,
            },
        )
    }

    /// A line with jitter and one spike, so the fit and the countdown are reached often.
    fn line() -> impl Strategy<Value = Vec<StepPeak>> {
        (
            0u64..(40 * GIB),
            0u64..(64 * MIB),
            0u64..(256 * MIB),
            0usize..200,
            0usize..200,
            any::<u64>(),
        )
            .prop_map(|(base, slope, jitter, len, spike, seed)| {
                let mut next = noise(jitter.max(1));
                let _ = (0..seed % 7).map(|_| next()).count();
                let mut peaks = series(0..len as u64, |step| {
                    (base + slope * step).saturating_add_signed(next())
                });
                if let Some(p) = peaks.get_mut(spike) {
                    p.peak += 4 * GIB;
                }
                peaks
            })
    }

    fn holds_together(peaks: &[StepPeak], room: Room) -> Result<(), TestCaseError> {
        let forecast = foresee(peaks, room);
        match &forecast {
            Forecast::OomIn {
                steps,
                steps_low,
                steps_high,
                bytes_per_step,
                ceiling,
                ..
            } => {
                prop_assert!(*steps_low <= *steps && *steps <= *steps_high);
                prop_assert!(*steps >= 1);
                prop_assert!(bytes_per_step.is_finite() && *bytes_per_step > 0.0);
                prop_assert_eq!(Some(*ceiling), room.ceiling());
                prop_assert!(describe(&forecast).is_some());
            }
            Forecast::Leak { bytes_per_step, .. } => {
                prop_assert!(bytes_per_step.is_finite() && *bytes_per_step > 0.0);
            }
            Forecast::Silent(_) => prop_assert!(describe(&forecast).is_none()),
        }
        Ok(())
    }

    fn runner() -> TestRunner {
        TestRunner::new(Config {
            cases: 400,
            ..Config::default()
        })
    }

    #[test]
    fn any_series_and_room_gives_a_forecast_that_holds_together_and_never_panics() {
        let outcome = runner().run(
            &(prop::collection::vec(peak(), 0..300), room()),
            |(mut peaks, room)| {
                // Half the cases ascending, so the fit is reached and not only the guards.
                if peaks.len() % 2 == 0 {
                    peaks.sort_by_key(|p| p.step);
                    peaks.dedup_by_key(|p| p.step);
                }
                holds_together(&peaks, room)
            },
        );
        assert!(outcome.is_ok(), "{outcome:?}");
    }

    #[test]
    fn any_jittered_line_gives_a_forecast_that_holds_together() {
        let outcome = runner().run(&(line(), room()), |(peaks, room)| {
            holds_together(&peaks, room)
        });
        assert!(outcome.is_ok(), "{outcome:?}");
    }
}
