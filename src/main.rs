use clap::{CommandFactory, FromArgMatches};
use std::process::ExitCode;
use std::time::Instant;

// See Cargo.toml: most of a frame's allocations are small and short-lived.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let started = Instant::now();
    let mut command = vramscope::cli::Cli::command();
    let matches = match command.try_get_matches_from_mut(std::env::args_os()) {
        Ok(matches) => matches,
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
    let cli = vramscope::cli::Cli::from_arg_matches(&matches)
        .unwrap_or_else(|e| e.format(&mut command).exit());
    // An option the chosen mode would ignore is refused, as clap refuses an unknown one.
    if let Err(message) = vramscope::cli_scope::refuse_ignored(&matches) {
        eprintln!("vramscope: {message}");
        return ExitCode::from(2);
    }
    vramscope::run(&cli, started)
}
