//! Application replay on one context (`range.rs`): set up (as kernel replay's `setup.rs`
//! does, plus the shared directory's `setup` line or image), configured once per run
//! (`SetConfig`: user range, application replay, else user replay), and the name CUPTI gives a
//! range.

use super::api::{call, ProfApi};
use super::driver::current_device;
use super::output::queue;
use super::range_state::{Context, Ranges};
use super::setup::{set_up, Profiled, Target, RANGE_CAPACITY};
use crate::cupti::api::{describe, Api};
use crate::cupti::state::CUPTI;
use rtrace_cupti_abi as abi;
use rtrace_format::{ChunkKind, Replay, PROFILING_NOTICE};
use std::ffi::{c_void, CStr};
use std::io::Write;

/// Sets application replay up on `ctx`: a `ProfilerSetup` chunk and a notice (in pass 0 also
/// the `setup` line; in later passes the image loaded), or a notice saying why not.
pub(super) fn set_up_context(
    api: &Api,
    prof: &ProfApi,
    r: &mut Ranges,
    ctx: *mut c_void,
    id: u32,
    notices: &mut Vec<String>,
) -> Context {
    let metrics = CUPTI.prof.metrics.get().map(Vec::as_slice).unwrap_or(&[]);
    let target = Target {
        ctx,
        context: id,
        device: current_device(),
    };
    let replay = Replay::Application;
    let mut context = Context {
        ctx: ctx as usize,
        id,
        profiled: None,
        passes: 0,
        ranges: 0,
        started: false,
        done: Vec::new(),
    };
    let (mut p, setup) = match set_up(
        api,
        prof,
        target,
        metrics,
        &mut r.initialized,
        notices,
        replay,
    ) {
        Ok(s) => s,
        Err(e) => {
            notices.push(e);
            return context;
        }
    };
    let image = r.dir.join(format!("image.{id}"));
    let prepared = if r.pass == 0 {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(r.dir.join("setup"))
            .and_then(|mut f| writeln!(f, "{id}\t{}\t{}", setup.passes, setup.chip))
            .map_err(|e| format!("cannot write to {}: {e}", r.dir.display()))
    } else {
        match std::fs::read(&image) {
            Ok(bytes) if bytes.len() == p.counter_data.len() => {
                p.counter_data = bytes;
                Ok(())
            }
            Ok(bytes) => Err(format!(
                "{} holds {} bytes, not the {} of this context's image (the runs differ)",
                image.display(),
                bytes.len(),
                p.counter_data.len()
            )),
            Err(e) => Err(format!(
                "pass {} finds no counter data of the earlier passes ({}: {e})",
                r.pass,
                image.display()
            )),
        }
    };
    if let Err(e) = prepared {
        notices.push(format!("{PROFILING_NOTICE} off for context {id}: {e}"));
        return context;
    }
    notices.push(format!(
        "{PROFILING_NOTICE} on for context {id} (device {}, {}): {} metrics, {} replay pass{} (application replay, pass {})",
        setup.device,
        setup.chip,
        setup.metrics.len(),
        setup.passes,
        if setup.passes == 1 { "" } else { "es" },
        r.pass
    ));
    context.passes = setup.passes;
    queue(
        ChunkKind::ProfilerSetup,
        rtrace_format::encode_value(&setup),
    );
    context.profiled = Some(p);
    context
}

/// `SetConfig` for one user range of pass `pass`: application replay, or user replay when
/// CUPTI refuses it (tried once; the mode that worked is kept, and a notice says which).
pub(super) fn set_config(
    api: &Api,
    prof: &ProfApi,
    p: &mut Profiled,
    pass: u32,
    mode: &mut Option<u32>,
    notices: &mut Vec<String>,
) -> Result<(), (&'static str, u32)> {
    let mut with = |replay: u32| {
        let mut c = abi::RangeProfilerSetConfig::new();
        c.range_profiler_object = p.range_object;
        c.config_size = p.config.len();
        c.config = p.config.as_ptr();
        c.counter_data_image_size = p.counter_data.len();
        c.counter_data_image = p.counter_data.as_mut_ptr();
        c.range = abi::USER_RANGE;
        c.replay_mode = replay;
        c.max_ranges_per_pass = RANGE_CAPACITY;
        c.num_nesting_levels = 1;
        c.min_nesting_level = 1;
        c.pass_index = pass as usize;
        c.target_nesting_level = 1;
        call(prof.set_config, &mut c)
    };
    let name = "cuptiRangeProfilerSetConfig";
    if let Some(m) = *mode {
        return match with(m) {
            abi::SUCCESS => Ok(()),
            rc => Err((name, rc)),
        };
    }
    let refused = match with(abi::APPLICATION_REPLAY) {
        abi::SUCCESS => {
            *mode = Some(abi::APPLICATION_REPLAY);
            notices.push(format!(
                "{PROFILING_NOTICE}: ranges profiled by CUPTI's application replay (pass {pass})"
            ));
            return Ok(());
        }
        rc => rc,
    };
    match with(abi::USER_REPLAY) {
        abi::SUCCESS => {
            *mode = Some(abi::USER_REPLAY);
            notices.push(format!(
                "{PROFILING_NOTICE}: CUPTI refused application replay ({}): ranges profiled by user replay (pass {pass})",
                describe(api, refused as i32)
            ));
            Ok(())
        }
        rc => Err((name, rc)),
    }
}

/// CUPTI's name of range `index` in `p`'s image (empty if it cannot say).
pub(super) fn range_name(prof: &ProfApi, p: &Profiled, index: usize) -> String {
    let mut r = abi::RangeProfilerCounterDataGetRangeInfo::new();
    r.counter_data_image = p.counter_data.as_ptr();
    r.counter_data_image_size = p.counter_data.len();
    r.range_index = index;
    r.range_delimiter = c"/".as_ptr();
    match call(prof.range_info, &mut r) {
        abi::SUCCESS if !r.range_name.is_null() => {
            // SAFETY: CUPTI returned a NUL-terminated string.
            unsafe { CStr::from_ptr(r.range_name) }
                .to_string_lossy()
                .into_owned()
        }
        _ => String::new(),
    }
}
