use clap::Parser;
use std::process::ExitCode;
use std::time::Instant;

// See Cargo.toml: most of a frame's allocations are small and short-lived.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let started = Instant::now();
    let cli = vramscope::cli::Cli::parse();
    vramscope::run(&cli, started)
}
