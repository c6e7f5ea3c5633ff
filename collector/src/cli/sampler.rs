//! `rtrace gpu-sampler`, hidden (`rtrace record --gpu-metrics` runs it: [`crate::sampler`]),
//! and the sampling rate it and `rtrace record --gpu-metrics` take.

use clap::Args;
use std::path::PathBuf;

/// Options of `rtrace gpu-sampler` (what `rtrace record` gives it).
#[derive(Debug, Args)]
pub struct GpuSamplerArgs {
    /// Samples a second.
    #[arg(long, value_parser = check_gpu_metrics)]
    pub hz: String,
    /// The trace's path pattern (`%p`: the sampler's pid).
    #[arg(short, long)]
    pub output: PathBuf,
    /// The CUPTI library to load (else `$RTRACE_CUPTI_LIBRARY`, else as `rtrace metrics`
    /// finds it).
    #[arg(long)]
    pub cupti: Option<PathBuf>,
    /// Replace a file at the trace's name.
    #[arg(long)]
    pub force_overwrite: bool,
}

/// A sampling rate (`--gpu-metrics=HZ`, `--hz`), as the format crate reads it.
pub fn check_gpu_metrics(v: &str) -> Result<String, String> {
    match rtrace_format::parse_gpu_metrics_hz(v) {
        Ok(Some(hz)) => Ok(hz.to_string()),
        Ok(None) => Err(format!(
            "'{v}' is not a sampling rate: give Hz, e.g. 10000 or 10kHz"
        )),
        Err(e) => Err(e),
    }
}

/// Runs the sampler; its exit code.
pub fn run(args: &GpuSamplerArgs) -> u8 {
    let opts = crate::sampler::SamplerOptions {
        hz: args
            .hz
            .parse()
            .unwrap_or(rtrace_format::DEFAULT_GPU_METRICS_HZ),
        output: args.output.clone(),
        cupti: crate::metrics::library_path(args.cupti.as_deref()),
        force_overwrite: args.force_overwrite,
    };
    match crate::sampler::run(&opts) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("rtrace gpu-sampler: {e}");
            // Said to `rtrace record` on standard output too: it waits for a line there.
            println!("off: {e}");
            1
        }
    }
}
