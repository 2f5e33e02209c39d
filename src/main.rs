use clap::{CommandFactory, FromArgMatches};
use std::process::ExitCode;
use std::time::Instant;

// See Cargo.toml: most of a frame's allocations are small and short-lived.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let started = Instant::now();
    let matches = vramscope::cli::Cli::command().get_matches();
    let cli = vramscope::cli::Cli::from_arg_matches(&matches)
        .unwrap_or_else(|e| e.format(&mut vramscope::cli::Cli::command()).exit());
    // An option the chosen mode would ignore is refused, as clap refuses an unknown one.
    if let Err(message) = vramscope::cli_scope::refuse_ignored(&matches) {
        eprintln!("vramscope: {message}");
        return ExitCode::from(2);
    }
    vramscope::run(&cli, started)
}
