// The lint policy (Cargo.toml [lints]): no unwrap, expect or panic outside tests.
#![deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::ExitCode;
use std::time::Instant;

// See Cargo.toml: most of a frame's allocations are small and short-lived.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Before Rust's runtime puts `/dev/null` on a closed standard output (src/stdout.rs).
#[used]
#[unsafe(link_section = ".init_array")]
static NOTE_CLOSED_STDOUT: extern "C" fn() = note_closed_stdout;

extern "C" fn note_closed_stdout() {
    vramscope::stdout::note_if_closed();
}

fn main() -> ExitCode {
    let started = Instant::now();
    let args: Vec<_> = std::env::args_os().collect();
    // The command line over the environment over the configuration file (src/cli/config).
    let resolved = match vramscope::cli::config::parse(&args) {
        Ok(resolved) => resolved,
        Err(status) => return status,
    };
    // An option the chosen mode would ignore is refused, as clap refuses an unknown one.
    if let Err(message) = vramscope::cli::scope::refuse_ignored(&resolved.matches) {
        eprintln!("vramscope: {message}");
        return ExitCode::from(2);
    }
    if let Some(vramscope::cli::Command::Config { default }) = resolved.cli.command {
        return vramscope::cli::config::show::run(&resolved, default);
    }
    vramscope::run(&resolved.cli, started)
}
