//! The `rtrace` command; everything lives in the `rtrace_collector` library.

fn main() -> std::process::ExitCode {
    rtrace_collector::cli::main()
}
