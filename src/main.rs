use clap::Parser;
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let started = Instant::now();
    let cli = vramscope::cli::Cli::parse();
    vramscope::run(&cli, started)
}
