//! `vramscope plot FILE -o timeline.svg|png`: a recording as a timeline a person reads at a
//! glance. One chart per GPU, wall-clock time across, GiB up to the device's limit: NVML's
//! used memory for the GPU; for each instrumented process its NVML used, allocated and
//! reserved bytes; each series' peak marked with its value (the allocator's true peak also
//! with its step and phase); one red cross per OOM, with its request, free memory, place
//! and outcome; every other training step shaded.
//!
//! - `collect`: one pass over the recording into a `Contents`, each series downsampled as it
//!   is read (`downsample`, keeping every bucket's maximum) with its steps (`steps`).
//! - `layout`, `draw`, `panel`, `labels`, `axis`, `style`: the figure, drawn with plotters
//!   on its SVG or bitmap backend.
//! - `font`: the font PNG text needs; `encode`: PNG files.

mod axis;
mod collect;
mod contents;
mod downsample;
mod draw;
mod encode;
mod error;
mod font;
mod labels;
mod layout;
mod panel;
#[cfg(test)]
mod period_tests;
mod steps;
mod style;

use crate::recording::scope::Asked;
use crate::recording::scoped;
use contents::Contents;
use error::fail;
use plotters::backend::{BitMapBackend, RGBPixel, SVGBackend};
use plotters::prelude::IntoDrawingArea;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Points per series at most: about one per pixel column of a wide chart.
pub const POINTS_PER_SERIES: usize = 2000;
/// Widest and highest image drawn (a PNG this size is 200 MB in memory).
pub const MAX_SIDE: u32 = 8192;

/// Options of `vramscope plot`.
#[derive(Clone, Debug)]
pub struct Options {
    pub width: u32,
    /// Chosen from the number of GPUs when absent.
    pub height: Option<u32>,
    /// The font for PNG text, instead of the system's DejaVu Sans.
    pub font: Option<PathBuf>,
}

/// The output format, from the output file's extension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Svg,
    Png,
}

impl Format {
    pub fn of(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "svg" => Some(Format::Svg),
            "png" => Some(Format::Png),
            _ => None,
        }
    }
}

/// Plots the part of `file` asked for (`recording::scope`) into `output`, saying on standard
/// error what part that is. Anything that prevents a plot is one line on standard error and
/// status 2; a recording damaged part-way is plotted up to the damage, which is named, and
/// exits 1.
pub fn run(file: &Path, output: &Path, options: &Options, asked: &Asked) -> ExitCode {
    match plot(file, output, options, asked) {
        Ok(None) => ExitCode::SUCCESS,
        Ok(Some(damage)) => {
            eprintln!("vramscope: plotted up to the damage: {damage}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("vramscope: {e}");
            ExitCode::from(2)
        }
    }
}

/// Writes the plot; returns the damage that cut the recording short, if any.
pub fn plot(
    file: &Path,
    output: &Path,
    options: &Options,
    asked: &Asked,
) -> Result<Option<String>, String> {
    let format = Format::of(output).ok_or_else(|| {
        format!(
            "cannot tell which format to write to {}: name it .svg or .png",
            output.display()
        )
    })?;
    // Before the recording is read, so a missing font costs no waiting.
    if format == Format::Png {
        font::register(options.font.as_deref())?;
    }
    let (recording, told) = scoped::open(file, asked)?;
    let contents = collect::collect(recording, POINTS_PER_SERIES);
    for note in told.notes() {
        eprintln!("vramscope: {note}");
    }
    if let Some(skipped) = &contents.skipped {
        eprintln!("vramscope: {skipped}");
    }
    if contents.panels.iter().all(|p| p.series.is_empty()) {
        let why = match &contents.damaged {
            Some(damage) => format!(" before the damage ({damage})"),
            None => String::new(),
        };
        return Err(format!(
            "{}: no GPU memory figures to plot{why}",
            file.display()
        ));
    }
    let layout = layout::layout(&contents, options.width, options.height)?;
    if layout.height > MAX_SIDE {
        return Err(format!(
            "{} charts need {} px, more than the {MAX_SIDE} px an image may be",
            contents.panels.len(),
            layout.height
        ));
    }
    let name = file.file_name().map_or_else(
        || file.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let bytes = render(format, &contents, &layout, &name)
        .map_err(|e| format!("cannot draw the plot: {e}"))?;
    std::fs::write(output, bytes).map_err(|e| format!("cannot write {}: {e}", output.display()))?;
    Ok(contents.damaged)
}

/// The figure as the bytes of an SVG or PNG file.
fn render(
    format: Format,
    contents: &Contents,
    layout: &layout::Layout,
    name: &str,
) -> Result<Vec<u8>, String> {
    let size = (layout.width, layout.height);
    match format {
        Format::Svg => {
            let mut svg = String::new();
            {
                let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
                draw::figure(&root, contents, layout, name)?;
                root.present().map_err(fail)?;
            }
            Ok(svg.into_bytes())
        }
        Format::Png => {
            let len = usize::try_from(u64::from(size.0) * u64::from(size.1) * 3).map_err(fail)?;
            let mut rgb = vec![0u8; len];
            {
                let backend = BitMapBackend::<RGBPixel>::with_buffer_and_format(&mut rgb, size)
                    .map_err(fail)?;
                let root = backend.into_drawing_area();
                draw::figure(&root, contents, layout, name)?;
                root.present().map_err(fail)?;
            }
            encode::png(&rgb, size.0, size.1)
        }
    }
}
