//! `vramscope completions SHELL` and `vramscope man`: shell completions and a man page made
//! from the same clap definition that parses the command line, so neither can fall behind a
//! new option or subcommand.

use clap_complete::Shell;
use std::process::ExitCode;

/// The completion script for `shell`, on standard output.
pub fn completions(shell: Shell) -> ExitCode {
    let mut command = crate::cli::config::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut command, "vramscope", &mut script);
    print(&script)
}

/// The man page (roff, section 1) on standard output: the top-level page, then one section
/// per subcommand with its own options, so `man vramscope` shows every command in one page.
pub fn man() -> ExitCode {
    match man_page() {
        Ok(page) => print(&page),
        Err(e) => {
            eprintln!("vramscope: cannot build the man page: {e}");
            ExitCode::from(1)
        }
    }
}

fn man_page() -> std::io::Result<Vec<u8>> {
    let command = crate::cli::config::command();
    let mut page = Vec::new();
    clap_mangen::Man::new(command.clone()).render(&mut page)?;
    for sub in command.get_subcommands() {
        // A subcommand's page title would be a section header of its own; only its body
        // (synopsis, description, options) is appended under `.SH "vramscope NAME"`.
        let name = sub.get_name();
        page.extend_from_slice(format!(".SH \"VRAMSCOPE {}\"\n", name.to_uppercase()).as_bytes());
        let sub = sub.clone().bin_name(format!("vramscope {name}"));
        let man = clap_mangen::Man::new(sub);
        man.render_synopsis_section(&mut page)?;
        man.render_description_section(&mut page)?;
        man.render_options_section(&mut page)?;
    }
    Ok(page)
}

fn print(bytes: &[u8]) -> ExitCode {
    // Both generators write ASCII/UTF-8 text from our own definitions.
    match crate::stdout::print(&String::from_utf8_lossy(bytes)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(status) => status,
    }
}
