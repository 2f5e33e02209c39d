use clap::Parser;
use std::process::ExitCode;
use std::time::Instant;

// See Cargo.toml: most of a frame's allocations are small and short-lived.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let started = Instant::now();
    let cli = match vramscope::cli::Cli::try_parse() {
        Ok(cli) => cli,
        // `--help` and `--version` to a pipe or file end as every printing command does
        // (output::stdout); clap would report success having written nothing.
        Err(e) if !e.use_stderr() => {
            return match vramscope::output::stdout::print(&e.render().to_string()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(status) => status,
            };
        }
        Err(e) => e.exit(),
    };
    vramscope::run(&cli, started)
}
