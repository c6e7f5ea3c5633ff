//! What GPU activity finds besides activity records, for the worker to write: the devices,
//! read once when it starts, and the modules CUPTI's resource callbacks report as they load
//! and unload, with their code images (each module's hash and CRC; the bytes when they are
//! stored, compressed by the worker as it writes them).

use super::api::CubinCrcParams;
use super::layout;
use super::state::CUPTI;
use crate::clock;
use crate::output::Sink;
use crate::thread::internal;
use rtrace_format::{ChunkKind, ModuleRecord, FLAG_CORRELATED, FLAG_UNLOADED};
use std::ffi::c_void;

/// Reads the devices, once (the driver is up).
pub(super) fn read_devices() {
    CUPTI.found.devices_read.call_once(|| {
        if let Ok(mut d) = CUPTI.found.devices.lock() {
            *d = internal(crate::devices::device_infos);
        }
    });
}

/// A module loaded, or about to be unloaded (inside the loading or unloading call, on its
/// thread): kept for the worker, with the call's correlation id. Rare, so it may lock and
/// allocate.
pub(super) fn on_module(data: *const u8, unloading: bool) {
    use layout::{module_resource_data as m, resource_data as r};
    // SAFETY: `data` is CUPTI's CUpti_ResourceData for a module-loaded callback; its
    // descriptor, if not NULL, is a CUpti_ModuleResourceData.
    let (context, descriptor) = unsafe {
        (
            (data.add(r::CONTEXT) as *const *mut c_void).read_unaligned(),
            (data.add(r::RESOURCE_DESCRIPTOR) as *const *const u8).read_unaligned(),
        )
    };
    if descriptor.is_null() {
        return;
    }
    // SAFETY: as above.
    let (module, cubin_size, cubin) = unsafe {
        (
            (descriptor.add(m::MODULE_ID) as *const u32).read_unaligned(),
            (descriptor.add(m::CUBIN_SIZE) as *const u64).read_unaligned(),
            (descriptor.add(m::P_CUBIN) as *const *const u8).read_unaligned(),
        )
    };
    let mut context_id = 0u32;
    if let (false, Some(api)) = (context.is_null(), CUPTI.api.get()) {
        // SAFETY: plain CUPTI query with a valid out-pointer.
        if internal(|| unsafe { (api.context_id)(context, &mut context_id) }) != 0 {
            context_id = 0;
        }
    }
    let correlation = crate::thread::current_correlation();
    let mut flags = if correlation != 0 { FLAG_CORRELATED } else { 0 };
    if unloading {
        flags |= FLAG_UNLOADED;
    }
    let rec = ModuleRecord {
        correlation,
        timestamp_ns: clock::now_ns(),
        cubin_size,
        module,
        context: context_id,
        flags: flags as u8,
    };
    if let Ok(mut m) = CUPTI.found.modules.lock() {
        m.push(rec);
    }
    if !unloading && !cubin.is_null() && cubin_size > 0 {
        // SAFETY: CUPTI's image of the module, `cubin_size` bytes, valid during the callback.
        let bytes = unsafe { std::slice::from_raw_parts(cubin, cubin_size as usize) };
        keep_image(module, context_id, bytes);
    }
}

/// Queues a module's image for the worker: its hash and CUPTI's CRC always; the bytes when
/// images are stored ([`crate::config::Config::module_images`]), the first time this process
/// sees the content, and (under `rtrace record`) only if no other process of the run claimed
/// it first. Inside the loading call (a module load: it may lock, copy and create a file).
fn keep_image(module: u32, context: u32, bytes: &[u8]) {
    let cfg = crate::state::config();
    let hash = rtrace_format::image_hash(bytes);
    // Stored here the first time this process sees the content, unless another process of
    // the run claimed it first (then every chunk of it says so).
    let (store, in_run) = match CUPTI.found.image_hashes.lock() {
        Ok(mut seen) => match seen.iter().find(|(h, _)| *h == hash) {
            Some(&(_, in_run)) => (false, in_run),
            None => {
                let in_run = cfg.module_images
                    && cfg.status_dir.as_deref().is_some_and(|dir| {
                        !crate::files::claim_in_status(dir, rtrace_format::STATUS_IMAGE, hash)
                    });
                seen.push((hash, in_run));
                (cfg.module_images && !in_run, in_run)
            }
        },
        Err(_) => (false, false),
    };
    let mut crc = 0;
    if let Some(get) = CUPTI.api.get().and_then(|a| a.cubin_crc) {
        let mut p = CubinCrcParams {
            size: std::mem::size_of::<CubinCrcParams>(),
            cubin_size: bytes.len(),
            cubin: bytes.as_ptr() as *const c_void,
            cubin_crc: 0,
        };
        // SAFETY: CUPTI reads the image and writes the CRC into `p`.
        if internal(|| unsafe { get(&mut p) }) == 0 {
            crc = p.cubin_crc;
        }
    }
    let image = rtrace_format::ModuleImage {
        module,
        context,
        hash,
        crc,
        size: bytes.len() as u64,
        bytes: store.then(|| bytes.to_vec()),
        in_run,
    };
    if let Ok(mut q) = CUPTI.found.images.lock() {
        q.push(image);
    }
}

/// Writes the devices, modules and module images found since the last call into `sink`.
/// Consumer only.
pub(super) fn drain_into(sink: &mut Sink) {
    let found = &CUPTI.found;
    if let Ok(mut d) = found.devices.lock() {
        for info in d.drain(..) {
            sink.chunk(
                ChunkKind::DeviceInfo,
                0,
                0,
                0,
                &rtrace_format::encode_value(&info),
            );
        }
    }
    if let Ok(mut m) = found.modules.lock() {
        for rec in m.drain(..) {
            sink.gpu_batch.modules.extend_from_slice(&rec.to_bytes());
        }
    }
    let images = found
        .images
        .lock()
        .map(|mut q| std::mem::take(&mut *q))
        .unwrap_or_default();
    // Compressing is the worker's (`encode`), never the loading thread's.
    for image in images {
        sink.chunk(ChunkKind::ModuleImage, 0, 0, 0, &image.encode());
    }
}
