use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = vramscope::cli::Cli::parse();
    vramscope::run(&cli)
}
