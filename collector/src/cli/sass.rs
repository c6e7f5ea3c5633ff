//! `rtrace sass`: the SASS of the traces' kernels ([`crate::sass`]).

use super::inputs::spool;
use crate::read::load_inputs;
use clap::Args;
use std::io::{self, Write};
use std::path::PathBuf;

/// Options of `rtrace sass`.
#[derive(Debug, Args)]
pub struct SassArgs {
    /// Only kernels whose demangled or mangled name matches REGEX.
    #[arg(long, value_name = "REGEX", value_parser = crate::filter::parse_regex)]
    pub kernel: Option<regex::Regex>,
    /// The nvdisasm to run [default: nvdisasm on PATH].
    #[arg(long, value_name = "PATH")]
    pub nvdisasm: Option<PathBuf>,
    /// Where to look for a source file that is not at the path its line info names (by its
    /// file name).
    #[arg(long, value_name = "DIR")]
    pub source_dir: Option<PathBuf>,
    /// Trace files, or directories of them.
    #[arg(value_name = "TRACE", required = true)]
    pub files: Vec<PathBuf>,
}

/// Runs `rtrace sass`; returns the exit code.
pub(super) fn run(args: &SassArgs) -> u8 {
    // The inputs first: a wrong path is the first thing to say, whatever the machine has.
    let Some(spooled) = spool(&args.files) else {
        return 2;
    };
    let loaded = match load_inputs(spooled.paths()) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("rtrace: {e}");
            return 2;
        }
    };
    let nvdisasm = match crate::nvdisasm::find(args.nvdisasm.as_deref()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rtrace: {e}");
            return 2;
        }
    };
    let mut sources = crate::sass::Sources::new(args.source_dir.clone());
    match crate::sass::render(
        &loaded.traces,
        &nvdisasm,
        args.kernel.as_ref(),
        &mut sources,
    ) {
        Ok(text) => {
            if let Some(line) = crate::images::Missing::of(&loaded.traces).line() {
                eprintln!("rtrace: {line}");
            }
            let mut stdout = io::stdout().lock();
            match stdout
                .write_all(text.as_bytes())
                .and_then(|_| stdout.flush())
            {
                Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
                    eprintln!("rtrace: writing the listing: {e}");
                    1
                }
                _ => 0,
            }
        }
        Err(e) => {
            eprintln!("rtrace: {e}");
            2
        }
    }
}
