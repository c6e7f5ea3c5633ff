//! Modules, functions and kernel launches.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_uint, c_void};

use super::{h, need, ptr, put};
use crate::activity::{self, SimOp, SIMOP_KERNEL};
use crate::config;
use crate::entry::locked;
use crate::errors::*;
use crate::module::{self, Builtin};
use crate::state::{decode, handle, Kind, State};
use crate::types::*;

/// `CU_FUNC_ATTRIBUTE_MAX` of CUDA 13.0.
pub const FUNC_ATTRIBUTE_MAX: c_int = 16;
/// `CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES`, `CU_FUNC_ATTRIBUTE_NUM_REGS`.
const FUNC_ATTRIBUTE_SHARED_SIZE_BYTES: c_int = 1;
const FUNC_ATTRIBUTE_NUM_REGS: c_int = 4;

/// `cuFuncGetAttribute` values (the same for every kernel).
pub fn function_attribute(attrib: c_int) -> Option<c_int> {
    let v = match attrib {
        0 => 1024,  // MAX_THREADS_PER_BLOCK
        4 => 32,    // NUM_REGS
        5 => 90,    // PTX_VERSION
        6 => 90,    // BINARY_VERSION
        8 => 49152, // MAX_DYNAMIC_SHARED_SIZE_BYTES
        9 => -1,    // PREFERRED_SHARED_MEMORY_CARVEOUT
        1..FUNC_ATTRIBUTE_MAX => 0,
        _ => return None,
    };
    Some(v)
}

/// The text of a module image, if it starts with the magic line. The magic is compared byte by
/// byte first, so a binary image (cubin, fatbin) is rejected without scanning it for a NUL.
///
/// # Safety
/// `image` must be non-NULL and point to a NUL-terminated string or to at least as many bytes
/// as it has before its first mismatch with the magic.
unsafe fn image_text(image: *const c_void) -> Option<String> {
    let p = image.cast::<u8>();
    // SAFETY: an image has at least one byte.
    let first = unsafe { *p };
    let magic = module::MAGIC.as_bytes();
    if first == magic[0] {
        for (i, &b) in magic.iter().enumerate() {
            // SAFETY: bytes up to the first mismatch (at the latest a NUL) are readable.
            if unsafe { *p.add(i) } != b {
                return None;
            }
        }
    } else if !(first.is_ascii_graphic() || first.is_ascii_whitespace()) {
        // A cubin (ELF) or fatbin: binary, not for this simulator.
        return None;
    }
    // SAFETY: the image is NUL-terminated text (a simcuda module or PTX, as CUDA requires).
    let text = unsafe { CStr::from_ptr(p.cast::<c_char>()) };
    text.to_str().ok().map(str::to_string)
}

/// Reads kernel argument `i` from `kernelParams`.
///
/// # Safety
/// `params` must hold at least `i + 1` pointers.
unsafe fn arg<T: Copy>(params: *mut *mut c_void, i: usize) -> Result<T, CUresult> {
    // SAFETY: the caller's contract.
    let p = unsafe { *params.add(i) };
    need(p)?;
    // SAFETY: a non-NULL kernel argument points to a value of the parameter's type.
    Ok(unsafe { p.cast::<T>().read_unaligned() })
}

/// Runs a built-in kernel's effect on memory.
///
/// # Safety
/// `params` must be NULL or hold the built-in's arguments (see `module.rs`).
unsafe fn run_builtin(st: &State, b: Builtin, params: *mut *mut c_void) -> Result<(), CUresult> {
    need(params)?;
    let in_bounds = |p: u64, n: u32| {
        st.check_range(p, u64::from(n) * 4)
            .map_err(|_| CUDA_ERROR_ILLEGAL_ADDRESS)
    };
    match b {
        Builtin::FillU32 | Builtin::AddU32 => {
            // SAFETY: the built-in's signature has three parameters.
            let (dst, value, n) = unsafe {
                (
                    arg::<u64>(params, 0)?,
                    arg::<u32>(params, 1)?,
                    arg::<u32>(params, 2)?,
                )
            };
            in_bounds(dst, n)?;
            let p = dst as *mut u32;
            for i in 0..n as usize {
                // SAFETY: `[dst, dst + 4n)` lies in a live allocation; unaligned access is fine.
                unsafe {
                    let v = if b == Builtin::FillU32 {
                        value
                    } else {
                        p.add(i).read_unaligned().wrapping_add(value)
                    };
                    p.add(i).write_unaligned(v);
                }
            }
        }
        Builtin::VecaddF32 => {
            // SAFETY: the built-in's signature has four parameters.
            let (a, b, c, n) = unsafe {
                (
                    arg::<u64>(params, 0)?,
                    arg::<u64>(params, 1)?,
                    arg::<u64>(params, 2)?,
                    arg::<u32>(params, 3)?,
                )
            };
            for p in [a, b, c] {
                in_bounds(p, n)?;
            }
            let (a, b, c) = (a as *const f32, b as *const f32, c as *mut f32);
            for i in 0..n as usize {
                // SAFETY: the three ranges lie in live allocations of at least 4n bytes.
                unsafe {
                    let v = a.add(i).read_unaligned() + b.add(i).read_unaligned();
                    c.add(i).write_unaligned(v);
                }
            }
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn launch(
    f: CUfunction,
    grid: [c_uint; 3],
    block: [c_uint; 3],
    sharedMemBytes: c_uint,
    hStream: CUstream,
    kernelParams: *mut *mut c_void,
    extra: *mut *mut c_void,
    ptsz: bool,
) -> Result<(), CUresult> {
    locked(|st, caller| {
        st.require_init()?;
        st.current(caller)?;
        let func = st.function(h(f))?;
        let (name, ns, builtin) = (func.name.clone(), func.ns, func.builtin);
        let threads = block.iter().map(|&d| u64::from(d)).product::<u64>();
        if grid.contains(&0)
            || block.contains(&0)
            || threads > 1024
            || block[0] > 1024
            || block[1] > 1024
            || block[2] > 64
            || grid[1] > 65535
            || grid[2] > 65535
            || sharedMemBytes > 232_448
            || (!kernelParams.is_null() && !extra.is_null())
        {
            return Err(CUDA_ERROR_INVALID_VALUE);
        }
        let sid = st.resolve_stream(h(hStream), ptsz, caller)?;
        if let Some(b) = builtin {
            // SAFETY: kernelParams holds the arguments of the kernel's signature (C contract).
            unsafe { run_builtin(st, b, kernelParams)? };
        }
        let ns = name
            .to_str()
            .ok()
            .and_then(|n| config::get().kernel_override(n))
            .unwrap_or(ns);
        let (start, end) = st.issue(sid, ns);
        let grid_id = st.grid_id();
        if activity::wants_op() {
            let (device, context_id, stream_id) = st.stream_place(sid);
            let attribute = |a| function_attribute(a).unwrap_or(0) as u32;
            let mut op = SimOp::zeroed(SIMOP_KERNEL);
            op.device = device;
            op.context_id = context_id;
            op.stream_id = stream_id;
            op.start_ns = start;
            op.end_ns = end;
            op.grid = grid;
            op.block = block;
            op.dynamic_shared = sharedMemBytes;
            op.static_shared = attribute(FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
            op.registers = attribute(FUNC_ATTRIBUTE_NUM_REGS);
            op.grid_id = grid_id;
            op.is_async = 1;
            activity::set_op(op, Some(name));
        }
        Ok(())
    })
}

api! {
    fn cuModuleLoadData(module: *mut CUmodule, image: *const c_void) {
        locked(|st, caller| {
            st.require_init()?;
            need(module)?;
            need(image)?;
            let ctx = st.current(caller)?;
            // SAFETY: non-NULL image; see image_text.
            let text = unsafe { image_text(image) }.ok_or(CUDA_ERROR_INVALID_IMAGE)?;
            let kernels = module::parse(&text).ok_or(CUDA_ERROR_INVALID_IMAGE)?;
            let id = st.load_module(ctx, kernels)?;
            if activity::wants_op() {
                let device = st.context_device(ctx)? as u32;
                let functions = st
                    .module_functions(id)
                    .into_iter()
                    .map(|(fid, name)| (fid as u32, name))
                    .collect();
                let image = (image, text.len() as u64);
                activity::report_module((device, ctx as u32), id as u32, image, functions);
            }
            // SAFETY: checked non-NULL.
            unsafe { put(module, ptr(handle(Kind::Module, id))) };
            Ok(())
        })
    }

    fn cuModuleUnload(hmod: CUmodule) {
        locked(|st, _| {
            st.require_init()?;
            let id = decode(Kind::Module, h(hmod)).unwrap_or(0);
            let ctx = st.unload_module(h(hmod))?;
            if activity::wants_op() {
                let device = st.context_device(ctx)? as u32;
                activity::report_module_unload((device, ctx as u32), id as u32);
            }
            Ok(())
        })
    }

    fn cuModuleGetFunction(hfunc: *mut CUfunction, hmod: CUmodule, name: *const c_char) {
        locked(|st, _| {
            st.require_init()?;
            need(hfunc)?;
            need(name)?;
            // SAFETY: a non-NULL kernel name is a NUL-terminated string.
            let name = unsafe { CStr::from_ptr(name) };
            let id = st.get_function(h(hmod), name.to_bytes())?;
            // SAFETY: checked non-NULL.
            unsafe { put(hfunc, ptr(handle(Kind::Function, id))) };
            Ok(())
        })
    }

    fn cuLaunchKernel(
        f: CUfunction,
        gridDimX: c_uint,
        gridDimY: c_uint,
        gridDimZ: c_uint,
        blockDimX: c_uint,
        blockDimY: c_uint,
        blockDimZ: c_uint,
        sharedMemBytes: c_uint,
        hStream: CUstream,
        kernelParams: *mut *mut c_void,
        extra: *mut *mut c_void,
    ) {
        let grid = [gridDimX, gridDimY, gridDimZ];
        let block = [blockDimX, blockDimY, blockDimZ];
        launch(f, grid, block, sharedMemBytes, hStream, kernelParams, extra, false)
    }

    fn cuLaunchKernel_ptsz(
        f: CUfunction,
        gridDimX: c_uint,
        gridDimY: c_uint,
        gridDimZ: c_uint,
        blockDimX: c_uint,
        blockDimY: c_uint,
        blockDimZ: c_uint,
        sharedMemBytes: c_uint,
        hStream: CUstream,
        kernelParams: *mut *mut c_void,
        extra: *mut *mut c_void,
    ) {
        let grid = [gridDimX, gridDimY, gridDimZ];
        let block = [blockDimX, blockDimY, blockDimZ];
        launch(f, grid, block, sharedMemBytes, hStream, kernelParams, extra, true)
    }

    fn cuFuncGetAttribute(pi: *mut c_int, attrib: CUenum, hfunc: CUfunction) {
        locked(|st, _| {
            st.require_init()?;
            need(pi)?;
            st.function(h(hfunc))?;
            let v = function_attribute(attrib).ok_or(CUDA_ERROR_INVALID_VALUE)?;
            // SAFETY: checked non-NULL.
            unsafe { put(pi, v) };
            Ok(())
        })
    }

    /// The returned string lives until the module is unloaded.
    fn cuFuncGetName(name: *mut *const c_char, hfunc: CUfunction) {
        locked(|st, _| {
            st.require_init()?;
            need(name)?;
            let f = st.function(h(hfunc))?;
            // SAFETY: checked non-NULL; the CString's buffer lives as long as the function.
            unsafe { put(name, f.name.as_ptr()) };
            Ok(())
        })
    }
}
