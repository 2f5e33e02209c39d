//! Rendering tests: whole screens drawn on ratatui's `TestBackend` from scenario monitors with
//! fixed timestamps, checked against reviewed snapshots (tests/snapshots/) and by asserting the
//! facts that matter on the buffer text: peaks labelled, absent figures as `n/a`, markers shown,
//! no colour under NO_COLOR, pure ASCII under `--ascii`, and no panic at any size.

mod tui_fixtures;

use ratatui::style::Color;
use tui_fixtures::*;
use vramscope::model::SourceEvent;
use vramscope::state::Monitor;
use vramscope::terminal_kit::theme::Theme;
use vramscope::tui::ui_state::{KillRequest, KillSignal, Mode, SortColumn};

#[test]
fn two_gpus_at_80x24() {
    let text = screen(&two_gpus(), &ui(), 80, 24);
    insta::assert_snapshot!("two_gpus_80x24", text);
    assert!(text.contains("GPU 0 NVIDIA H100 80GB HBM3"));
    // The spike 42 s ago is marked on the plot and labelled; the all-time peak too.
    assert!(
        text.contains("▲ 70.0 GiB 42s ago"),
        "window peak label:\n{text}"
    );
    assert!(
        text.contains("all-time 75.0 GiB 8m ago"),
        "all-time peak label:\n{text}"
    );
    let plot = text
        .lines()
        .find(|l| l.trim_start().starts_with("2m "))
        .expect("memory plot row");
    assert_eq!(
        plot.matches('▲').count(),
        1,
        "one peak marker on the plot: {plot}"
    );
    assert!(text.contains("host RAM 12.3/62.8 GiB (avail 48.0 GiB)"));
    assert!(text.contains("exited 2m ago"));
    assert!(
        text.contains("python train.py --e…"),
        "command before container tag, its cut marked:\n{text}"
    );
    assert!(text.contains("5151*"), "pid not visible here is marked");
    assert!(text.contains("VRAM▼"), "sort column marked");
}

#[test]
fn absent_figures_render_as_na_never_zero() {
    let text = screen(&two_gpus(), &ui(), 120, 40);
    insta::assert_snapshot!("two_gpus_120x40", text);
    let stats = text
        .lines()
        .skip_while(|l| !l.contains("GPU 1 NVIDIA A100"))
        .find(|l| l.starts_with("temp "))
        .expect("GPU 1 stats line");
    for expected in ["temp n/a", "power n/a", "fan n/a", "enc/dec n/a", "thr n/a"] {
        assert!(stats.contains(expected), "{expected} in {stats}");
    }
    assert!(
        !stats.contains("fan 0"),
        "absent fan must not read as 0: {stats}"
    );
    // GPU 0's readable figures are there, with units.
    assert!(text.contains(
        "64°C  412W/700W  SM/mem 1980/2619MHz  fan 30%  enc/dec 0/0%  P0  thr power-cap"
    ));
    assert!(text.contains("python train.py --epochs 90 [3f5c2a1b9d8e]"));
    // Unreadable process figures: SM% of pid 6000 and its CPU%.
    let carol = text
        .lines()
        .find(|l| l.contains("jupyter-kernel"))
        .expect("carol's row");
    assert_eq!(
        carol.matches("n/a").count(),
        2,
        "SM% and CPU% absent: {carol}"
    );
    // The status line names the faults only: what the hardware lacks is a fact, listed by `w`.
    let status = text.lines().last().expect("status line");
    assert!(
        status.starts_with("temp: no permission on GPU 1  ") && status.contains("w why n/a"),
        "{status}"
    );
    assert!(!status.contains("not supported"), "{status}");
}

#[test]
fn the_reasons_overlay_lists_every_reason_in_full() {
    let mut ui = ui();
    ui.mode = Mode::Reasons;
    let text = screen(&two_gpus(), &ui, 80, 24);
    insta::assert_snapshot!("reasons_80x24", text);
    for reason in [
        "temp: no permission on GPU 1",
        "power: not supported on GPU 1",
        "fan: not supported on GPU 1",
        "enc: not supported on GPU 1",
        "dec: not supported on GPU 1",
        "throttle: not supported on GPU 1",
    ] {
        assert!(text.contains(reason), "{reason}:\n{text}");
    }
    let problems = text.find("problems").expect("faults heading");
    let facts = text
        .find("not reported by this hardware or driver")
        .expect("facts heading");
    assert!(problems < facts, "faults first:\n{text}");
    assert!(text.contains("any key closes"), "{text}");
}

#[test]
fn the_reasons_overlay_scrolls_when_taller_than_the_screen() {
    let mut ui = ui();
    ui.mode = Mode::Reasons;
    let top = screen(&two_gpus(), &ui, 60, 10);
    assert!(
        top.contains("lines 1-7 of 10; Up/Down scroll, other keys close"),
        "{top}"
    );
    assert!(top.contains("problems"), "{top}");
    ui.reasons_scroll = 100;
    let bottom = screen(&two_gpus(), &ui, 60, 10);
    assert!(!bottom.contains("problems"), "scrolled:\n{bottom}");
    let footer = bottom
        .lines()
        .find(|l| l.contains("lines "))
        .expect("footer");
    // Scrolled past the end, the last page shows: `lines A-N of N`.
    let numbers: Vec<&str> = footer
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .collect();
    assert_eq!(numbers[1], numbers[2], "{footer}");
}

#[test]
fn wide_terminal_puts_panels_side_by_side() {
    let text = screen(&two_gpus(), &ui(), 200, 50);
    insta::assert_snapshot!("two_gpus_200x50", text);
    let title_row = text
        .lines()
        .find(|l| l.contains("GPU 0 "))
        .expect("title row");
    assert!(
        title_row.contains("GPU 1 "),
        "both panels on one row: {title_row}"
    );
}

#[test]
fn eight_gpus_at_80x24_are_compact_and_leave_room_for_processes() {
    let text = screen(&many_gpus(8), &ui(), 80, 24);
    insta::assert_snapshot!("eight_gpus_80x24", text);
    // The one model is said once, above the rows, not on each of them.
    assert_eq!(text.matches("H100 80GB HBM3").count(), 1, "{text}");
    assert!(text.contains("8 GPUs: NVIDIA H100 80GB HBM3"), "{text}");
    for i in 0..8 {
        assert!(
            text.lines().any(|l| l.starts_with(&format!("{i} ▕"))),
            "GPU {i}:\n{text}"
        );
    }
    assert!(text.lines().filter(|l| l.contains("python worker")).count() >= 5);
}

#[test]
fn compact_rows_keep_ecc_and_thermal_alarms() {
    let m = eight_gpus_with_alarms();
    for width in [80, 100] {
        let text = screen(&m, &ui(), width, 24);
        let row = |i: usize| {
            text.lines()
                .find(|l| l.starts_with(&format!("{i} ")))
                .unwrap_or_default()
                .to_string()
        };
        assert!(
            row(3).contains("ECC 2 corr 1 uncorr"),
            "{width} columns:\n{text}"
        );
        assert!(
            row(5).contains("thr hw-thermal"),
            "{width} columns:\n{text}"
        );
        // Idle clocks are routine: no alarm on the others.
        assert!(!row(0).contains("thr"), "{width} columns:\n{text}");
    }
}

/// The three lines of the small panel titled `title`, cut to its columns.
fn tile_rows(text: &str, title: &str) -> [String; 3] {
    let lines: Vec<Vec<char>> = text.lines().map(|l| l.chars().collect()).collect();
    let title: Vec<char> = title.chars().collect();
    let found = lines.iter().enumerate().find_map(|(row, l)| {
        l.windows(title.len())
            .position(|w| w == title.as_slice())
            .map(|col| (row, col))
    });
    let Some((row, col)) = found else {
        panic!("no panel titled {title:?}:\n{text}");
    };
    // Up to the next panel's column, or the line's end.
    let width = lines[row][col + title.len()..]
        .windows(5)
        .position(|w| w.iter().collect::<String>() == "   GP")
        .map_or(usize::MAX, |end| end + title.len());
    std::array::from_fn(|i| {
        let line = lines.get(row + 1 + i).map_or(&[][..], Vec::as_slice);
        line.iter()
            .skip(col)
            .take(width)
            .collect::<String>()
            .trim_end()
            .to_string()
    })
}

/// The lines of the screen from the one containing `from` up to (not including) the first
/// after it containing `to`.
fn lines_between<'a>(text: &'a str, from: &str, to: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|l| !l.contains(from))
        .skip(1)
        .take_while(|l| !l.contains(to))
        .collect()
}

#[test]
fn eight_gpus_at_200x50_are_a_grid_with_history_and_room_for_processes() {
    let text = screen(&eight_gpus_with_alarms(), &ui(), 200, 50);
    insta::assert_snapshot!("eight_gpus_grid_200x50", text);
    assert_eq!(
        text.matches("H100 80GB HBM3").count(),
        1,
        "the model said once:\n{text}"
    );
    let tile = |i: usize| tile_rows(&text, &format!(" GPU {i} "));
    for i in 0..8 {
        let [memory, util, _] = tile(i);
        assert!(
            memory.starts_with("mem  ") && util.starts_with("util "),
            "GPU {i}: memory and utilisation charts:\n{text}"
        );
        let bars = |s: &str| s.chars().filter(|c| "▁▂▃▄▅▆▇█".contains(*c)).count();
        assert!(
            bars(&memory) > 40 && bars(&util) > 40,
            "GPU {i} history:\n{text}"
        );
    }
    // GPU 6's spike 30 s ago is marked on its memory chart; utilisation swings, so its
    // peak is marked too.
    assert!(tile(6)[0].contains('▲'), "{:?}", tile(6));
    assert!(tile(6)[1].contains('▲'), "{:?}", tile(6));
    assert!(tile(6)[2].contains("▲79.0G 30s"), "{:?}", tile(6));
    assert!(tile(3)[2].contains("ECC 2 corr 1 uncorr"), "{:?}", tile(3));
    assert!(tile(5)[2].contains("thr hw-thermal"), "{:?}", tile(5));
    // The table keeps most of the screen: every process and room to spare.
    let table = lines_between(&text, "COMMAND", "all figures readable");
    assert_eq!(
        table.iter().filter(|l| l.contains("python worker")).count(),
        8
    );
    assert!(table.len() >= 30, "{} table rows:\n{text}", table.len());
}

#[test]
fn one_gpu_at_200x50_grows_its_charts_with_round_time_ticks() {
    let text = screen(&one_gpu(), &ui(), 200, 50);
    insta::assert_snapshot!("one_gpu_200x50", text);
    // Eight rows of memory chart between the memory bar and the peak label.
    let memory = lines_between(&text, "mem  ▕", "(max of");
    assert_eq!(memory.len(), 8, "{text}");
    assert!(
        memory[0].starts_with("  5m "),
        "a round window: {}",
        memory[0]
    );
    let util = lines_between(&text, "(max of", "╵");
    assert_eq!(util.len(), 8, "{text}");
    assert!(util[0].starts_with("util "), "{text}");
    // The axis: ticks at round ages only, newest `now`.
    let axis = text.lines().find(|l| l.contains('╵')).expect("time axis");
    assert!(axis.trim_end().ends_with("now"), "{axis}");
    let ticks: Vec<&str> = axis
        .split('╵')
        .skip(1)
        .map(|t| t.split_whitespace().next().unwrap_or(""))
        .collect();
    assert!(ticks.len() >= 4, "{axis}");
    for tick in &ticks {
        assert!(
            ["5m", "4m", "3m", "2m", "1m"].contains(tick),
            "{tick} in {axis}"
        );
    }
    // The spike 90 s ago is marked at the top of its column and labelled.
    assert!(text.contains("▲ 76.0 GiB 1m ago (max of 5m)"), "{text}");
    assert_eq!(memory[0].matches('▲').count(), 1, "{}", memory[0]);
    // The table still has most of the lower half.
    let table = lines_between(&text, "COMMAND", "? help");
    assert!(table.len() >= 20, "{} table rows:\n{text}", table.len());
}

#[test]
fn stale_and_lost_gpus_are_flagged() {
    let text = screen(&faulty_gpus(), &ui(), 100, 30);
    insta::assert_snapshot!("faulty_gpus_100x30", text);
    assert!(text.contains("GPU 1 NVIDIA L40S [LOST]"));
    assert!(text.contains("GPU 2 NVIDIA L40S [STALE]"));
    assert!(text.contains("mem  n/a (GPU lost)"));
    // The lost GPU's processes are unknown, not none.
    assert!(
        text.contains("process list n/a on GPU 1: GPU lost"),
        "{text}"
    );
    let status = text.lines().last().expect("status line");
    assert!(
        status.starts_with("GPU 1 lost; GPU 2 stale: last sample 30s ago"),
        "{status}"
    );
}

#[test]
fn sorting_puts_absent_values_last_and_breaks_ties_by_pid() {
    let m = two_gpus();
    let mut ui = ui();
    assert_eq!(
        row_pids(&m, &ui),
        vec![4242, 5151, 6000, 7777],
        "VRAM descending, exited last"
    );
    ui.sort_descending = false;
    assert_eq!(
        row_pids(&m, &ui),
        vec![6000, 5151, 4242, 7777],
        "absent stays last ascending"
    );
    ui.sort = SortColumn::VramPeak;
    ui.sort_descending = true;
    assert_eq!(
        row_pids(&m, &ui),
        vec![4242, 7777, 5151, 6000],
        "the exited peak still counts"
    );
    ui.sort = SortColumn::Cpu;
    assert_eq!(row_pids(&m, &ui), vec![4242, 5151, 6000, 7777]);
    ui.sort = SortColumn::User;
    ui.sort_descending = false;
    assert_eq!(row_pids(&m, &ui), vec![4242, 5151, 6000, 7777]);
}

#[test]
fn filter_matches_user_command_container_and_pid() {
    let m = two_gpus();
    let mut ui = ui();
    for (filter, pids) in [
        ("ALICE", vec![4242]),
        ("python", vec![4242, 7777]),
        ("3f5c2a", vec![4242]),
        ("515", vec![5151]),
        ("nothing-matches", vec![]),
        // GPU 1 holds only carol's kernel; GPU 0 the rest.
        ("gpu:1", vec![6000]),
        ("GPU:0 python", vec![4242, 7777]),
        ("gpu:1 python", vec![]),
        ("gpu:0 gpu:1 alice", vec![4242]),
    ] {
        ui.filter = filter.into();
        assert_eq!(row_pids(&m, &ui), pids, "filter {filter}");
    }
    ui.filter = "python".into();
    ui.sort = SortColumn::Pid;
    ui.sort_descending = false;
    ui.mode = Mode::Filter;
    let text = screen(&m, &ui, 80, 24);
    insta::assert_snapshot!("filter_prompt_80x24", text);
    assert!(
        text.lines()
            .last()
            .is_some_and(|l| l.starts_with("/python"))
    );
    assert!(text.contains("PID▲"));
}

#[test]
fn selection_scrolls_into_view() {
    let m = many_gpus(8);
    let mut ui = ui();
    ui.sort = SortColumn::Pid;
    ui.sort_descending = false;
    ui.selected = 7;
    // 8 compact GPU rows leave the table a header and four rows at 80x16.
    let text = screen(&m, &ui, 80, 16);
    assert!(text.contains("1007"), "selected row visible:\n{text}");
    assert!(
        !text.contains("1002 "),
        "scrolled past the first rows:\n{text}"
    );
    let header = text
        .lines()
        .find(|l| l.contains("COMMAND"))
        .unwrap_or_default();
    // At 80 columns what the width hides (CPU%) outranks the window's place.
    assert!(
        header.contains("x: +CPU%"),
        "the column the width hides: {header}"
    );
    let text = screen(&m, &ui, 160, 16);
    let header = text
        .lines()
        .find(|l| l.contains("COMMAND"))
        .unwrap_or_default();
    assert!(
        header.contains("rows 5-8 of 8  per GPU 0:1 1:1 2:1 3:1 4:1 5:1 6:1 7:1"),
        "with room, in words and per GPU: {header}"
    );
}

#[test]
fn help_overlay_lists_every_key() {
    let mut ui = ui();
    ui.mode = Mode::Help;
    let text = screen(&two_gpus(), &ui, 80, 24);
    insta::assert_snapshot!("help_80x24", text);
    for (key, _) in vramscope::tui::panels::help::KEYS {
        assert!(text.contains(key), "{key} listed");
    }
}

#[test]
fn help_at_60x20_scrolls_to_its_legend_and_cuts_no_line() {
    let mut ui = ui();
    ui.mode = Mode::Help;
    let text = screen(&two_gpus(), &ui, 60, 20);
    insta::assert_snapshot!("help_60x20", text);
    assert!(text.contains("Up / Down"), "the first key:\n{text}");
    assert!(
        text.contains("Up/Down scroll"),
        "it says it scrolls:\n{text}"
    );
    // A description too long for the column goes on under it rather than being cut.
    assert!(text.contains("details of the selected process"), "{text}");
    let enter = text
        .lines()
        .position(|l| l.contains("details of the selected"))
        .unwrap_or(0);
    let below = text.lines().nth(enter + 1).unwrap_or_default();
    assert!(
        below.contains("closes)"),
        "wrapped on the next line:\n{text}"
    );
    ui.help_scroll = 18;
    let text = screen(&two_gpus(), &ui, 60, 20);
    assert!(text.contains("What the labels mean"), "{text}");
    assert!(
        text.contains("share of its total"),
        "the bare % explained:\n{text}"
    );
    ui.help_scroll = 20;
    let text = screen(&two_gpus(), &ui, 60, 20);
    assert!(text.contains("max of 5m"), "{text}");
    ui.help_scroll = 1_000;
    let text = screen(&two_gpus(), &ui, 60, 20);
    insta::assert_snapshot!("help_60x20_end", text);
    for label in ["all-time", "pk 63G 2m", "PEAK", "STEP 92+a", "gpu:3"] {
        assert!(text.contains(label), "{label} explained:\n{text}");
    }
    assert!(text.contains("highest since vramscope"), "{text}");
}

#[test]
fn read_only_help_lists_no_signal_keys() {
    let mut ui = ui();
    ui.mode = Mode::Help;
    ui.read_only = true;
    let text = screen(&two_gpus(), &ui, 120, 60);
    assert!(text.contains("read-only: k and K are disabled"), "{text}");
    assert!(!text.contains("send SIGTERM"), "k not listed:\n{text}");
    assert!(!text.contains("send SIGKILL"), "K not listed:\n{text}");
    assert!(text.contains("reset peaks"), "other keys stay:\n{text}");
}

#[test]
fn sorting_by_gpu_shows_the_whole_label() {
    let mut ui = ui();
    ui.sort = SortColumn::Gpu;
    ui.sort_descending = false;
    let text = screen(&two_gpus(), &ui, 80, 24);
    assert!(text.contains("GPU▲"), "{text}");
}

#[test]
fn detail_pane_shows_sparklines_with_peaks() {
    let m = two_gpus();
    let mut ui = ui();
    ui.mode = Mode::Detail;
    let text = screen(&m, &ui, 100, 30);
    insta::assert_snapshot!("detail_100x30", text);
    assert!(text.contains("PID 4242  alice  GPU 0"));
    assert!(text.contains("command python train.py --epochs 90"));
    assert!(text.contains("VRAM 30.0 GiB (38% of the GPU)"));
    assert!(text.contains("RSS  12.0 GiB"));
    assert!(
        text.contains("▲ 36.0 GiB 22s ago") && text.contains("all-time 36.0 GiB 22s ago"),
        "VRAM peak labelled"
    );

    ui.selected = 3;
    let exited = screen(&m, &ui, 100, 30);
    assert!(exited.contains("exited 2m ago"), "{exited}");
    assert!(
        exited.contains("no data in the last"),
        "exited: nothing in the window"
    );
}

#[test]
fn kill_confirmation_names_pid_user_command_and_signal() {
    let mut ui = ui();
    ui.mode = Mode::ConfirmKill(KillRequest {
        pid: 4242,
        starttime: 1,
        signal: KillSignal::Term,
        user: "alice".into(),
        command: "python train.py --epochs 90".into(),
    });
    let text = screen(&two_gpus(), &ui, 80, 24);
    insta::assert_snapshot!("kill_confirm_80x24", text);
    assert!(text.contains("send SIGTERM to pid 4242 (user alice)"));
    assert!(text.contains("python train.py --epochs 90"));
    assert!(text.contains("y to confirm, any other key cancels"));
}

#[test]
fn nvml_problem_keeps_the_screen_useful() {
    let text = screen(&no_nvml(), &ui(), 80, 24);
    insta::assert_snapshot!("no_nvml_80x24", text);
    assert!(text.contains("NVIDIA management library not found"));
    assert!(text.contains("hint: install the NVIDIA driver"));
    assert!(text.contains("host RAM 12.3/62.8 GiB"));
    assert!(text.contains("NVML unavailable"));
}

#[test]
fn paused_marker_and_flash_message() {
    let m = two_gpus();
    let mut ui = ui();
    ui.frozen = Some(std::sync::Arc::new(snapshot(&m)));
    ui.flash = Some("sent SIGTERM to 4242".into());
    let text = screen(&m, &ui, 80, 24);
    assert!(
        text.lines()
            .next()
            .is_some_and(|l| l.starts_with("vramscope  PAUSED "))
    );
    assert!(
        text.lines()
            .last()
            .is_some_and(|l| l.starts_with("sent SIGTERM to 4242"))
    );
}

#[test]
fn ascii_mode_draws_only_ascii() {
    let m = two_gpus();
    let mut ui = ui();
    ui.ascii = true;
    let theme = Theme::new(true, true);
    let text = text(&draw(&m, &ui, &theme, 80, 24));
    insta::assert_snapshot!("two_gpus_ascii_80x24", text);
    assert!(text.is_ascii(), "non-ASCII in:\n{text}");
    assert!(text.contains("^ 70.0 GiB 42s ago"));
    for mode in [Mode::Help, Mode::Detail, Mode::Filter] {
        ui.mode = mode;
        for (w, h) in [(80, 24), (200, 50)] {
            for m in [&m, &many_gpus(8), &faulty_gpus(), &no_nvml()] {
                let screen = tui_fixtures::text(&draw(m, &ui, &theme, w, h));
                assert!(screen.is_ascii(), "non-ASCII in:\n{screen}");
            }
        }
    }
}

#[test]
fn no_color_theme_sets_no_colour_anywhere() {
    let theme = Theme::new(false, false);
    let mut ui = ui();
    for mode in [Mode::Normal, Mode::Help, Mode::Detail] {
        ui.mode = mode;
        for m in [two_gpus(), faulty_gpus(), no_nvml()] {
            let buffer = draw(&m, &ui, &theme, 120, 40);
            for cell in &buffer.content {
                assert_eq!(cell.fg, Color::Reset, "fg at {:?}", cell.symbol());
                assert_eq!(cell.bg, Color::Reset, "bg at {:?}", cell.symbol());
            }
        }
    }
}

#[test]
fn every_size_draws_without_panicking() {
    let monitors = [
        two_gpus(),
        many_gpus(8),
        faulty_gpus(),
        no_nvml(),
        Monitor::new(T0),
        one_gpu(),
        eight_gpus_with_alarms(),
        many_gpus(24),
    ];
    let modes = [
        Mode::Normal,
        Mode::Filter,
        Mode::Help,
        Mode::Detail,
        Mode::ConfirmKill(KillRequest {
            pid: 1,
            starttime: 1,
            signal: KillSignal::Kill,
            user: "root".into(),
            command: "x".repeat(300),
        }),
    ];
    let sizes = [
        (0, 0),
        (1, 1),
        (10, 3),
        (19, 4),
        (20, 5),
        (40, 10),
        (80, 24),
        (120, 40),
        (200, 50),
        (200, 60),
        (400, 120),
    ];
    for m in &monitors {
        for mode in &modes {
            let mut ui = ui();
            ui.mode = mode.clone();
            ui.selected = 99;
            ui.filter = "ü".into();
            for ascii in [false, true] {
                let theme = Theme::new(true, ascii);
                for (w, h) in sizes {
                    draw(m, &ui, &theme, w, h);
                }
            }
        }
    }
}

#[test]
fn tiny_terminals_say_so() {
    let m = two_gpus();
    assert_eq!(
        screen(&m, &ui(), 10, 3),
        "too small \n\n\n".replace(" \n", "\n")
    );
    let text = screen(&m, &ui(), 40, 10);
    insta::assert_snapshot!("two_gpus_40x10", text);
    assert!(
        text.contains("VRAM"),
        "even 40x10 shows some of the table:\n{text}"
    );
}

#[test]
fn narrow_gpu_lines_drop_whole_figures_never_half_of_one() {
    // A figure cut to its first digits reads as another figure ("64°C" cut to "6").
    // Every figure a narrow line ends with must exist whole on the same screen drawn wide.
    fn gpu_lines(text: &str) -> Vec<String> {
        text.lines()
            .skip(1)
            .take_while(|l| !l.starts_with("host"))
            .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
            .map(str::to_string)
            .collect()
    }
    for m in [two_gpus(), many_gpus(8)] {
        let wide = gpu_lines(&screen(&m, &ui(), 200, 60)).join(" ");
        let whole: Vec<&str> = wide.split_whitespace().collect();
        for width in 30..=100 {
            for line in gpu_lines(&screen(&m, &ui(), width, 24)) {
                let last = line.split_whitespace().last().unwrap_or("");
                assert!(
                    last != "pk" && whole.contains(&last),
                    "{width} columns: line ends in a cut figure {last:?}:\n{line}"
                );
            }
        }
    }
}

#[test]
fn a_young_process_s_charts_speak_only_for_the_history_behind_them() {
    // Five seconds of samples in a window of a minute and more: the label must not claim a
    // flat minute it never saw.
    let mut m = Monitor::new(NOW - 5_000);
    m.ingest(SourceEvent::Started {
        driver: driver(),
        devices: vec![info(0, "NVIDIA H100 80GB HBM3", 80 * GIB)],
    });
    for t in (NOW - 5_000..=NOW).step_by(1_000) {
        let mut gpu = sample(0, t, 20 * GIB, 80 * GIB, 50);
        gpu.processes = Ok(vec![gpu_process(4242, 8 * GIB, Ok(40))]);
        let host = host_sample(
            t,
            vec![host_process(4242, "alice", "python train.py", GIB, 99.0)],
        );
        m.ingest(SourceEvent::Batch(vec![
            SourceEvent::Device(Box::new(gpu)),
            SourceEvent::Host(Box::new(host)),
        ]));
    }
    let mut ui = ui();
    ui.mode = Mode::Detail;
    let text = screen(&m, &ui, 100, 30);
    assert!(text.contains("flat at 8.00 GiB over the last 5s"), "{text}");
    assert!(text.contains("flat at 1.00 GiB over the last 5s"), "{text}");
    assert!(!text.contains("over the last 1m"), "{text}");
}

#[test]
fn a_narrow_gpu_line_keeps_the_ecc_alarm_and_drops_n_a_first() {
    use vramscope::model::Absent;
    let mut m = Monitor::new(T0);
    m.ingest(SourceEvent::Started {
        driver: driver(),
        devices: vec![info(0, "NVIDIA H100 80GB HBM3", 80 * GIB)],
    });
    let mut t = NOW - 10_000;
    while t <= NOW {
        let s = vramscope::model::DeviceSample {
            fan_percent: Err(Absent::NotSupported),
            ecc_corrected: Ok(3),
            ecc_uncorrected: Ok(1),
            throttle_reasons: Ok(0x01),
            ..sample(0, t, 20 * GIB, 80 * GIB, 50)
        };
        m.ingest(SourceEvent::Device(Box::new(s)));
        t += INTERVAL_MS;
    }
    let stats_line = |width: u16| {
        screen(&m, &ui(), width, 24)
            .lines()
            .find(|l| l.starts_with("64"))
            .map(str::to_string)
            .unwrap_or_default()
    };
    let wide = stats_line(120);
    assert!(
        wide.contains("fan n/a") && wide.contains("ECC 3 corr 1 uncorr"),
        "all figures when there is room:\n{wide}"
    );
    // Wide enough for the temperature and the alarm: the alarm stays at every such width.
    for width in 40..=100 {
        let line = stats_line(width);
        assert!(
            line.contains("ECC 3 corr 1 uncorr"),
            "{width} columns: the ECC alarm is kept:\n{line}"
        );
        if line.contains("fan n/a") {
            assert!(
                line.contains("P0") && line.contains("enc/dec"),
                "{width} columns: `fan n/a` outlasted a reading:\n{line}"
            );
        }
    }
    let narrow = stats_line(60);
    assert!(
        !narrow.contains("fan") && narrow.starts_with("64°C"),
        "the n/a goes first:\n{narrow}"
    );
}

/// The two-GPU monitor with 4242's command as a real launcher writes it: the interpreter's
/// full path, the script's full path, and many arguments.
fn long_command_monitor() -> (Monitor, &'static str) {
    const LONG: &str = "/root/.pyenv/versions/3.11.7/bin/python3 /home/alice/projects/llm/train.py \
        --config configs/llama-70b.yaml --epochs 90 --lr 3e-4 --output /scratch/alice/runs/final";
    let mut m = two_gpus();
    let hosts = vec![
        host_process(4242, "alice", LONG, 12 * GIB, 101.5),
        host_process(5151, "bob", "ollama serve", 3 * GIB, 2.0),
        host_process(6000, "carol", "jupyter-kernel", GIB, 0.0),
    ];
    m.ingest(SourceEvent::Host(Box::new(host_sample(NOW, hosts))));
    (m, LONG)
}

#[test]
fn commands_show_program_and_script_with_a_marked_cut() {
    let (m, _) = long_command_monitor();
    for (theme, mark) in [
        (Theme::new(true, false), "…"),
        (Theme::new(true, true), "~"),
    ] {
        let text = text(&draw(&m, &ui(), &theme, 100, 30));
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with("4242"))
            .expect("row of 4242");
        assert!(
            row.contains(" python3 train.py --config"),
            "program and script by name:\n{row}"
        );
        assert!(!row.contains("/root/"), "no interpreter path:\n{row}");
        assert!(row.ends_with(mark), "the cut is marked with {mark}:\n{row}");
    }
    // A command that fits is not marked.
    let text = screen(&m, &ui(), 100, 30);
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("5151"))
        .expect("row of 5151");
    assert!(row.trim_end().ends_with("ollama serve"), "{row}");
}

#[test]
fn detail_pane_wraps_the_full_command() {
    let (m, long) = long_command_monitor();
    let mut ui = ui();
    ui.mode = Mode::Detail;
    let text = screen(&m, &ui, 80, 30);
    // The pane's lines between its borders, label and indent removed, joined again.
    let inside: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split('│').nth(1))
        .map(str::trim)
        .collect();
    let start = inside
        .iter()
        .position(|l| l.starts_with("command "))
        .expect("command line");
    let mut joined = inside[start]["command ".len()..].to_string();
    for l in &inside[start + 1..] {
        if l.starts_with("container ") {
            break;
        }
        joined.push_str(l);
    }
    let squeezed: String = long.split_whitespace().collect();
    let shown: String = joined.split_whitespace().collect();
    assert_eq!(shown, squeezed, "every character of the command:\n{text}");
    assert!(
        text.contains("VRAM 30.0 GiB"),
        "the charts still follow:\n{text}"
    );
}

/// `/proc/<pid>/stat`'s start time (field 22), read here as the host sampler reads it.
fn starttime_of(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after_name = &stat[stat.rfind(')').expect("comm") + 2..];
    after_name
        .split(' ')
        .nth(19)
        .and_then(|f| f.parse().ok())
        .expect("starttime")
}

#[test]
fn a_process_off_the_gpu_list_but_alive_has_left_the_gpu_not_exited() {
    let mut child = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("sleep");
    let pid = child.id();
    let mut m = Monitor::new(T0);
    m.ingest(SourceEvent::Started {
        driver: driver(),
        devices: vec![info(0, "NVIDIA H100 80GB HBM3", 80 * GIB)],
    });
    let mut t = NOW - 60_000;
    while t <= NOW {
        let mut s = sample(0, t, 20 * GIB, 80 * GIB, 50);
        // On the GPU for the first half minute, then off its list.
        if t < NOW - 30_000 {
            s.processes = Ok(vec![gpu_process(pid, 4 * GIB, Ok(10))]);
            let host = vramscope::model::HostProcess {
                local_pid: Some(pid),
                starttime: Some(starttime_of(pid)),
                ..host_process(pid, "alice", "python train.py", GIB, 50.0)
            };
            m.ingest(SourceEvent::Host(Box::new(host_sample(t, vec![host]))));
        }
        m.ingest(SourceEvent::Device(Box::new(s)));
        t += INTERVAL_MS;
    }
    let row_of = |text: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(&pid.to_string()))
            .map(str::to_string)
            .unwrap_or_default()
    };
    let alive = screen(&m, &ui(), 100, 30);
    assert!(
        row_of(&alive).contains("left GPU 31s "),
        "alive and off the list:\n{alive}"
    );
    child.kill().expect("kill");
    child.wait().expect("wait");
    // The monitor learns it is gone at its next host pass, as it does every 2 s live.
    m.ingest(SourceEvent::Host(Box::new(host_sample(NOW, vec![]))));
    let gone = screen(&m, &ui(), 100, 30);
    assert!(row_of(&gone).contains("exited 31s ago"), "gone:\n{gone}");
}

#[test]
fn a_process_away_from_its_gpu_leaves_a_break_in_its_vram_chart() {
    use std::sync::Arc;
    use vramscope::state::ProcessKey;
    let mut m = Monitor::new(T0);
    m.ingest(SourceEvent::Started {
        driver: driver(),
        devices: vec![info(0, "NVIDIA H100 80GB HBM3", 80 * GIB)],
    });
    // Listed for 10 s, off the list for 10 s, listed again for 10 s.
    let start = NOW - 30_000;
    for i in 0..30 {
        let t = start + i * INTERVAL_MS;
        let mut s = sample(0, t, 20 * GIB, 80 * GIB, 50);
        if !(10..20).contains(&i) {
            s.processes = Ok(vec![gpu_process(4242, 4 * GIB, Ok(10))]);
        }
        m.ingest(SourceEvent::Device(Box::new(s)));
    }
    let uuid = m.devices()[0].key();
    let key = ProcessKey {
        pid: 4242,
        gpu_uuid: Arc::from(uuid.as_str()),
    };
    let series = m.process_series(&key).expect("its history");
    let cols = series.vram.query_held(start, start + 30_000, 30);
    assert!(cols[..10].iter().all(Option::is_some), "{cols:?}");
    assert!(cols[10..20].iter().all(Option::is_none), "away: {cols:?}");
    assert!(cols[20..].iter().all(Option::is_some), "{cols:?}");
}

#[test]
fn a_process_first_seen_is_not_read_yet_rather_than_out_of_sight() {
    let mut m = Monitor::new(T0);
    m.ingest(SourceEvent::Started {
        driver: driver(),
        devices: vec![info(0, "NVIDIA H100 80GB HBM3", 80 * GIB)],
    });
    let mut s = sample(0, NOW, 20 * GIB, 80 * GIB, 50);
    s.processes = Ok(vec![gpu_process(4242, 4 * GIB, Ok(10))]);
    m.ingest(SourceEvent::Device(Box::new(s)));
    let row_of = |text: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with("4242"))
            .map(str::to_string)
            .unwrap_or_default()
    };
    // Listed by NVML, no host pass has read it yet: n/a, with no `*`.
    let unread = screen(&m, &ui(), 100, 30);
    let row = row_of(&unread);
    assert!(
        row.contains("n/a") && !row.contains("4242*"),
        "not read yet:\n{unread}"
    );
    let mut detail = ui();
    detail.mode = Mode::Detail;
    let pane = screen(&m, &detail, 100, 30);
    assert!(pane.contains("pid here not read yet"), "{pane}");

    // The host pass read it and cannot see it from here: now it is `PID*`.
    let hidden = vramscope::model::HostProcess {
        local_pid: None,
        ..host_process(4242, "alice", "python train.py", GIB, 50.0)
    };
    m.ingest(SourceEvent::Host(Box::new(host_sample(NOW, vec![hidden]))));
    let read = screen(&m, &ui(), 100, 30);
    assert!(row_of(&read).contains("4242*"), "not visible here:\n{read}");
    let pane = screen(&m, &detail, 100, 30);
    assert!(
        pane.contains("pid here not visible from this pid namespace"),
        "{pane}"
    );
}

#[test]
fn chosen_columns_show_the_process_type_host_mem_share_and_elapsed_time() {
    let mut ui = ui();
    ui.columns = vramscope::tui::columns::parse("user,type,mem,elapsed").unwrap();
    let text = screen(&two_gpus(), &ui, 120, 30);
    insta::assert_snapshot!("columns_chosen_120x30", text);
    let header = text
        .lines()
        .find(|l| l.trim_start().starts_with("PID"))
        .expect("table header");
    // The labels, without the position at the right (`per GPU 0:3`).
    let header = header.split("rows").next().unwrap_or_default();
    for label in ["USER", "TYPE", "VRAM", "%MEM", "ELAPSED", "COMMAND"] {
        assert!(header.contains(label), "{label}: {header}");
    }
    for left_out in ["GPU", "PEAK", "SM%", "RSS", "CPU%"] {
        assert!(!header.contains(left_out), "{left_out}: {header}");
    }
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("4242"))
        .expect("row of 4242");
    // A compute process; 12 GiB of the host's 62.8 GiB; no start time read in this fixture.
    assert!(
        row.contains(" C ") && row.contains("19.1") && row.contains("n/a"),
        "{row}"
    );

    // `x`: every column, the chosen ones and the rest.
    ui.every_column = true;
    let every = screen(&two_gpus(), &ui, 160, 30);
    let header = every
        .lines()
        .find(|l| l.trim_start().starts_with("PID"))
        .expect("table header");
    for label in [
        "USER", "GPU", "TYPE", "VRAM", "PEAK", "SM%", "RSS", "%MEM", "CPU%", "ELAPSED",
    ] {
        assert!(header.contains(label), "{label}: {header}");
    }
}

#[test]
fn the_host_line_shows_cpu_and_load_average() {
    let mut m = two_gpus();
    let mut host = host_sample(
        NOW,
        vec![host_process(4242, "alice", "python train.py", GIB, 1.0)],
    );
    host.load = Some(vramscope::model::HostLoad {
        cpu_percent: Some(23.4),
        load_average: [1.2, 0.8, 0.5],
    });
    m.ingest(SourceEvent::Host(Box::new(host)));
    let text = screen(&m, &ui(), 120, 30);
    let line = text
        .lines()
        .find(|l| l.starts_with("host RAM"))
        .expect("host line");
    assert!(line.contains("CPU 23%  load 1.20 0.80 0.50"), "{line}");

    let mut first = host_sample(NOW, Vec::new());
    first.load = Some(vramscope::model::HostLoad {
        cpu_percent: None,
        load_average: [0.0, 0.0, 0.0],
    });
    m.ingest(SourceEvent::Host(Box::new(first)));
    let text = screen(&m, &ui(), 120, 30);
    assert!(
        text.contains("CPU n/a  load 0.00 0.00 0.00"),
        "no share before two passes, never 0%:\n{text}"
    );
}

#[test]
fn grouped_by_gpu_each_gpu_s_rows_sit_under_its_line() {
    let mut ui = ui();
    ui.group_by_gpu = true;
    let text = screen(&two_gpus(), &ui, 100, 30);
    insta::assert_snapshot!("grouped_by_gpu_100x30", text);
    let lines: Vec<&str> = text.lines().collect();
    let at = |needle: &str| {
        lines
            .iter()
            .position(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("{needle}:\n{text}"))
    };
    let gpu0 = at("── GPU 0 NVIDIA H100 80GB HBM3  2 processes, 38.0 GiB");
    let gpu1 = at("── GPU 1 NVIDIA A100-SXM4-40GB  1 process, 2.00 GiB");
    let row = |pid: &str| {
        lines
            .iter()
            .position(|l| l.trim_start().starts_with(pid))
            .unwrap_or_else(|| panic!("{pid}:\n{text}"))
    };
    // GPU 0's processes (the exited one too) under its line, GPU 1's under its own.
    for pid in ["4242", "5151", "7777"] {
        assert!(gpu0 < row(pid) && row(pid) < gpu1, "{pid}:\n{text}");
    }
    assert!(gpu1 < row("6000"), "{text}");
}

#[test]
fn pcie_throughput_shows_on_the_gpu_panel_and_tile_only_when_sampled() {
    let with_pcie = |m: &mut Monitor, count: u32| {
        for i in 0..count {
            let s = vramscope::model::DeviceSample {
                pcie_tx_kbs: Some(Ok(1000)),
                pcie_rx_kbs: Some(Ok(2000)),
                ecc_uncorrected: Ok(u64::from(i == 3)),
                ..sample(i, NOW, 20 * GIB, 80 * GIB, 50)
            };
            m.ingest(SourceEvent::Device(Box::new(s)));
        }
    };
    let mut one = one_gpu();
    let before = screen(&one, &ui(), 120, 40);
    assert!(!before.contains("PCIe"), "not asked, not shown:\n{before}");
    with_pcie(&mut one, 1);
    let text = screen(&one, &ui(), 120, 40);
    assert!(
        text.contains("P0  PCIe tx 1000 KiB/s rx 1.95 MiB/s  thr power-cap"),
        "{text}"
    );
    let mut eight = eight_gpus_with_alarms();
    with_pcie(&mut eight, 8);
    let text = screen(&eight, &ui(), 200, 50);
    let [.., figures] = tile_rows(&text, " GPU 0 ");
    assert!(figures.contains("  PCIe 1000K/2.0M/s  "), "{figures}");
    // Alarms still outrank it.
    let [.., figures] = tile_rows(&text, " GPU 3 ");
    assert!(figures.contains("ECC 0 corr 1 uncorr"), "{figures}");
}

/// What happens on the machine after the pause, as samples the monitor still takes in:
/// GPU 0 climbs to a new all-time high of 79 GiB, pid 4242 to a new peak of 50 GiB (and its
/// host RSS to 20 GiB), pid 7777 (exited 2 minutes before the pause) is listed again and a
/// new pid 8888 appears.
fn after_the_pause(m: &mut Monitor) {
    for i in 1..=5 {
        let t = NOW + i * INTERVAL_MS;
        let mut s0 = sample(0, t, 79 * GIB, 80 * GIB, 99);
        s0.processes = Ok(vec![
            gpu_process(4242, 50 * GIB, Ok(99)),
            gpu_process(5151, 8 * GIB, Ok(3)),
            gpu_process(7777, 12 * GIB, Ok(50)),
            gpu_process(8888, 9 * GIB, Ok(50)),
        ]);
        m.ingest(SourceEvent::Device(Box::new(s0)));
        let mut s1 = sample_with_absences(1, t, 2 * GIB + GIB / 2, 40 * GIB);
        s1.processes = Ok(vec![gpu_process(
            6000,
            2 * GIB,
            Err(vramscope::model::Absent::NotSupported),
        )]);
        m.ingest(SourceEvent::Device(Box::new(s1)));
        m.ingest(SourceEvent::Host(Box::new(host_sample(
            t,
            vec![
                host_process(
                    4242,
                    "alice",
                    "python train.py --epochs 90",
                    20 * GIB,
                    100.0,
                ),
                host_process(7777, "erin", "python again.py", GIB, 1.0),
                host_process(8888, "frank", "python new.py", GIB, 1.0),
            ],
        ))));
    }
}

#[test]
fn a_paused_screen_shows_the_moment_it_froze_and_nothing_after() {
    let mut m = two_gpus();
    let mut ui = ui();
    ui.frozen = Some(std::sync::Arc::new(snapshot(&m)));
    let mut before = Vec::new();
    for mode in [Mode::Normal, Mode::Detail] {
        ui.mode = mode;
        for selected in [0, 3] {
            ui.selected = selected;
            before.push(screen(&m, &ui, 120, 40));
        }
    }
    after_the_pause(&mut m);
    let mut after = Vec::new();
    for mode in [Mode::Normal, Mode::Detail] {
        ui.mode = mode;
        for selected in [0, 3] {
            ui.selected = selected;
            after.push(screen(&m, &ui, 120, 40));
        }
    }
    let main = &after[0];
    // The all-time peak of the moment it froze, 8 minutes before it, never one from after
    // the pause read as "0s ago".
    assert!(main.contains("all-time 75.0 GiB 8m ago"), "{main}");
    assert!(!main.contains("79.0 GiB"), "{main}");
    let detail = &after[2];
    assert!(detail.contains("all-time 36.0 GiB 22s ago"), "{detail}");
    assert!(!detail.contains("50.0 GiB"), "{detail}");
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(b, a, "the paused screen changed");
    }
}
