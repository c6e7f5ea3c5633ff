//! What a subscriber hears: every call at entry and exit, with the GPU operation it queued, the
//! memory it allocated or freed, the synchronization it made, or the context, stream or module
//! it created or loaded.
//! The collector keeps only this thread's calls (other tests may run meanwhile).

use std::cell::RefCell;
use std::ffi::{c_void, CStr};

use super::*;
use crate::api::context::*;
use crate::api::device::*;
use crate::api::memory::*;
use crate::api::module::*;
use crate::api::stream::*;
use crate::cupti::*;
use crate::state::decode;

#[derive(Debug)]
struct Seen {
    site: u32,
    name: String,
    correlation_id: u32,
    result: u32,
    context_id: u32,
    start: u64,
    end: u64,
    op: Option<(SimOp, String)>,
    /// A module's functions: `(id, index, name)`, read during the callback.
    functions: Vec<(u32, u32, String)>,
}

thread_local! {
    static SEEN: RefCell<Vec<Seen>> = const { RefCell::new(Vec::new()) };
    static NEXT: RefCell<u32> = const { RefCell::new(100) };
}

unsafe extern "C" fn collect(call: *const SimCall) -> u32 {
    // SAFETY: simcuda's SimCall, valid during the callback.
    let c = unsafe { &*call };
    // SAFETY: as above; names are NUL-terminated.
    let text = |p: *const std::os::raw::c_char| {
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    };
    // SAFETY: as above.
    let op = unsafe { c.op.as_ref() }.map(|op| {
        let name = if op.name.is_null() {
            String::new()
        } else {
            text(op.name)
        };
        (*op, name)
    });
    // SAFETY: as above: a module op's array of `function_count` functions.
    let functions = unsafe { c.op.as_ref() }
        .filter(|op| op.kind == SIMOP_MODULE)
        .map(|op| {
            (0..op.function_count as usize)
                .map(|i| {
                    // SAFETY: as above.
                    let f = unsafe { *op.functions.add(i) };
                    (f.id, f.index, text(f.name))
                })
                .collect()
        })
        .unwrap_or_default();
    SEEN.with(|s| {
        s.borrow_mut().push(Seen {
            site: c.site,
            name: text(c.name),
            correlation_id: c.correlation_id,
            result: c.result,
            context_id: c.context_id,
            start: c.start_ns,
            end: c.end_ns,
            op,
            functions,
        })
    });
    NEXT.with(|n| {
        let mut n = n.borrow_mut();
        *n += 1;
        *n
    })
}

#[test]
fn subscriber_hears_every_call_and_its_operation() {
    // SAFETY: a wrong version changes nothing; `collect` is a SimCallback.
    unsafe {
        assert_eq!(
            simcuda_activity_subscribe(SIMCUDA_ACTIVITY_VERSION + 1, Some(collect)),
            -1
        );
        assert_eq!(
            simcuda_activity_subscribe(SIMCUDA_ACTIVITY_VERSION, Some(collect)),
            0
        );
    }
    let image = c"simcuda-module\nkernel k 3000\nkernel slow 100000\n";
    let (mut dev, mut ctx, mut module, mut func) = (
        0,
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    );
    let (mut stream, mut dptr, mut pinned) =
        (std::ptr::null_mut(), 0u64, std::ptr::null_mut::<c_void>());
    let mut current = std::ptr::null_mut();
    let (mut slow, mut event) = (std::ptr::null_mut(), std::ptr::null_mut());
    let (mut ctx2, mut stream2) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: the driver API with valid out-pointers.
    unsafe {
        assert_eq!(cuInit(0), 0);
        assert_eq!(cuDeviceGet(&mut dev, 0), 0);
        assert_eq!(cuDevicePrimaryCtxRetain(&mut ctx, dev), 0);
        assert_eq!(cuCtxSetCurrent(ctx), 0);
        assert_eq!(cuModuleLoadData(&mut module, image.as_ptr().cast()), 0);
        assert_eq!(cuModuleGetFunction(&mut func, module, c"k".as_ptr()), 0);
        assert_eq!(cuStreamCreate(&mut stream, 1), 0);
        assert_eq!(cuMemAlloc_v2(&mut dptr, 4096), 0);
        assert_eq!(cuMemAllocHost_v2(&mut pinned, 4096), 0);
        assert_eq!(cuMemcpyHtoDAsync_v2(dptr, pinned, 4096, stream), 0);
        assert_eq!(cuMemsetD32_v2(dptr, 0xabcd, 16), 0);
        assert_eq!(
            cuLaunchKernel(
                func,
                2,
                3,
                4,
                32,
                1,
                1,
                96,
                stream,
                std::ptr::null_mut(),
                std::ptr::null_mut()
            ),
            0
        );
        assert_eq!(cuCtxGetCurrent(&mut current), 0);
        assert_eq!(cuMemsetD8_v2(0, 1, 1), CUDA_ERROR_INVALID_VALUE_CODE);
        assert_eq!(cuModuleGetFunction(&mut slow, module, c"slow".as_ptr()), 0);
        let none = std::ptr::null_mut();
        assert_eq!(
            cuLaunchKernel(slow, 1, 1, 1, 1, 1, 1, 0, stream, none, none),
            0
        );
        assert_eq!(cuEventCreate(&mut event, 0), 0);
        assert_eq!(cuEventRecord(event, stream), 0);
        assert_eq!(cuStreamWaitEvent(std::ptr::null_mut(), event, 0), 0);
        assert_eq!(cuEventSynchronize(event), 0);
        assert_eq!(cuStreamSynchronize(stream), 0);
        assert_eq!(cuStreamQuery(stream), 0);
        assert_eq!(cuEventQuery(event), 0);
        assert_eq!(cuCtxSynchronize(), 0);
        assert_eq!(cuMemFree_v2(dptr), 0);
        assert_eq!(cuCtxCreate_v2(&mut ctx2, 0, dev), 0);
        assert_eq!(cuStreamCreateWithPriority(&mut stream2, 0, -7), 0);
        assert_eq!(cuCtxDestroy_v2(ctx2), 0);
        assert_eq!(
            simcuda_activity_subscribe(SIMCUDA_ACTIVITY_VERSION, None),
            0
        );
        assert_eq!(cuMemFreeHost(pinned), 0);
    }
    let (notices, seen): (Vec<Seen>, Vec<Seen>) = SEEN
        .with(|s| s.take())
        .into_iter()
        .partition(|s| s.site == SIMCALL_NOTICE);
    // One notice: cuCtxDestroy_v2 is about to destroy ctx2 (with the id its entry got).
    let ctx2_id = decode(Kind::Context, ctx2 as usize).unwrap() as u32;
    assert_eq!(notices.len(), 1);
    let n = &notices[0];
    assert_eq!(n.name, "cuCtxDestroy_v2");
    let destroy = seen
        .iter()
        .find(|s| s.name == "cuCtxDestroy_v2" && s.site == SIMCALL_EXIT)
        .unwrap();
    assert_eq!(n.correlation_id, destroy.correlation_id);
    let (op, _) = n.op.clone().unwrap();
    assert_eq!((op.kind, op.context_id), (SIMOP_CONTEXT_DESTROY, ctx2_id));
    assert_eq!(op.context, ctx2);
    // Two callbacks per call, entry then exit, with the id returned at entry.
    assert_eq!(seen.len(), 2 * 28);
    for pair in seen.chunks(2) {
        let (enter, exit) = (&pair[0], &pair[1]);
        assert_eq!(
            (enter.site, exit.site),
            (SIMCALL_ENTER, SIMCALL_EXIT),
            "{enter:?}"
        );
        assert_eq!(enter.name, exit.name);
        assert_eq!(
            (enter.correlation_id, enter.result, enter.op.is_none()),
            (0, 0, true)
        );
        assert_eq!(enter.start, enter.end);
        assert_eq!(exit.start, enter.start);
        assert!(exit.correlation_id > 100);
    }
    let exits: Vec<&Seen> = seen.iter().filter(|s| s.site == SIMCALL_EXIT).collect();
    let names: Vec<&str> = exits.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names[..4],
        [
            "cuInit",
            "cuDeviceGet",
            "cuDevicePrimaryCtxRetain",
            "cuCtxSetCurrent"
        ]
    );
    // Before cuCtxSetCurrent there is no current context; afterwards, the primary one.
    let ctx_id = decode(Kind::Context, ctx as usize).unwrap() as u32;
    assert_eq!(exits[3].context_id, 0);
    assert_eq!(exits[4].context_id, ctx_id);
    // A locked call spans its own clock step.
    assert_eq!(exits[0].end - exits[0].start, 1000);
    let stream_id = decode(Kind::Stream, stream as usize).unwrap() as u32;

    let (copy, _) = exits[9]
        .op
        .clone()
        .unwrap_or_else(|| panic!("{:?}", exits[9]));
    assert_eq!(exits[9].name, "cuMemcpyHtoDAsync_v2");
    assert_eq!(
        (copy.kind, copy.bytes, copy.is_async),
        (SIMOP_MEMCPY, 4096, 1)
    );
    assert_eq!(copy.copy_kind, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD);
    assert_eq!(
        (copy.src_kind, copy.dst_kind),
        (
            CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
            CUPTI_ACTIVITY_MEMORY_KIND_DEVICE
        )
    );
    assert_eq!(
        (copy.device, copy.context_id, copy.stream_id),
        (0, ctx_id, stream_id)
    );
    assert_eq!(
        (copy.start_ns, copy.end_ns),
        (exits[9].end, exits[9].end + 410)
    );

    let (set, _) = exits[10].op.clone().unwrap();
    assert_eq!(
        (set.kind, set.bytes, set.value, set.is_async),
        (SIMOP_MEMSET, 64, 0xabcd, 0)
    );
    assert_eq!(set.dst_kind, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE);
    assert_ne!(set.stream_id, stream_id); // the legacy stream

    let (k, name) = exits[11].op.clone().unwrap();
    assert_eq!((k.kind, name.as_str()), (SIMOP_KERNEL, "k"));
    assert_eq!((k.grid, k.block), ([2, 3, 4], [32, 1, 1]));
    assert_eq!(
        (k.dynamic_shared, k.static_shared, k.registers),
        (96, 0, 32)
    );
    assert_eq!(k.end_ns - k.start_ns, 3000);
    assert!(k.grid_id >= 1);

    // The lock-free cuCtxGetCurrent: no clock step; a failed memset: its code, no operation.
    assert_eq!(
        (exits[12].name.as_str(), exits[12].start == exits[12].end),
        ("cuCtxGetCurrent", true)
    );
    assert_eq!(
        (exits[13].result, exits[13].op.is_none()),
        (CUDA_ERROR_INVALID_VALUE_CODE as u32, true)
    );

    // Allocations and releases: at the host clock after the call's own step.
    let memory = |i: usize| {
        let (op, _) = exits[i]
            .op
            .clone()
            .unwrap_or_else(|| panic!("{:?}", exits[i]));
        assert_eq!((op.start_ns, op.end_ns), (exits[i].end, exits[i].end));
        assert_eq!(
            (op.device, op.context_id, op.stream_id),
            (0, ctx_id, SIM_ID_NONE)
        );
        (
            exits[i].name.as_str(),
            op.kind,
            op.address,
            op.bytes,
            op.dst_kind,
        )
    };
    let (device, host) = (
        CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
        CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
    );
    assert_eq!(
        [memory(7), memory(8), memory(24)],
        [
            ("cuMemAlloc_v2", SIMOP_ALLOC, dptr, 4096, device),
            ("cuMemAllocHost_v2", SIMOP_ALLOC, pinned as u64, 4096, host),
            ("cuMemFree_v2", SIMOP_FREE, dptr, 4096, device),
        ]
    );

    // Synchronizations: the host clock before and after the wait.
    let (slow_op, _) = exits[15].op.clone().unwrap();
    let event_id = decode(Kind::Event, event as usize).unwrap() as u32;
    let legacy = set.stream_id;
    let sync = |i: usize| {
        let (op, _) = exits[i]
            .op
            .clone()
            .unwrap_or_else(|| panic!("{:?}", exits[i]));
        assert_eq!(op.kind, SIMOP_SYNC);
        assert_eq!(
            (op.start_ns, op.end_ns),
            (exits[i].start + 1000, exits[i].end)
        );
        (
            exits[i].name.as_str(),
            op.sync_type,
            op.context_id,
            op.stream_id,
            op.event_id,
            op.end_ns - op.start_ns,
        )
    };
    let waited = slow_op.end_ns - (exits[19].start + 1000);
    assert!(waited > 90_000, "{waited}");
    assert_eq!(
        (18..=23).map(sync).collect::<Vec<_>>(),
        [
            (
                "cuStreamWaitEvent",
                CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT,
                ctx_id,
                legacy,
                event_id,
                0
            ),
            (
                "cuEventSynchronize",
                CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE,
                ctx_id,
                SIM_ID_NONE,
                event_id,
                waited
            ),
            (
                "cuStreamSynchronize",
                CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE,
                ctx_id,
                stream_id,
                SIM_ID_NONE,
                0
            ),
            (
                "cuStreamQuery",
                CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE,
                ctx_id,
                stream_id,
                SIM_ID_NONE,
                0
            ),
            (
                "cuEventQuery",
                CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE,
                ctx_id,
                SIM_ID_NONE,
                event_id,
                0
            ),
            (
                "cuCtxSynchronize",
                CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE,
                ctx_id,
                SIM_ID_NONE,
                SIM_ID_NONE,
                0
            ),
        ]
    );
    assert_eq!(exits[19].end, slow_op.end_ns);

    // The module and its functions (in image order), the created streams and context.
    let (module_op, _) = exits[4].op.clone().unwrap();
    assert_eq!(exits[4].name, "cuModuleLoadData");
    assert_eq!(
        (module_op.kind, module_op.device, module_op.context_id),
        (SIMOP_MODULE, 0, ctx_id)
    );
    assert_eq!(module_op.context, ctx);
    let module_id = decode(Kind::Module, module as usize).unwrap() as u32;
    assert_eq!(module_op.module_id, module_id);
    assert_eq!(
        (module_op.image, module_op.image_size),
        (
            image.as_ptr().cast::<c_void>(),
            image.to_bytes().len() as u64
        )
    );
    let func_id = decode(Kind::Function, func as usize).unwrap() as u32;
    let slow_id = decode(Kind::Function, slow as usize).unwrap() as u32;
    assert_eq!(
        exits[4].functions,
        [
            (func_id, 0, "k".to_string()),
            (slow_id, 1, "slow".to_string())
        ]
    );
    let (stream_op, _) = exits[6].op.clone().unwrap();
    assert_eq!(
        (stream_op.kind, stream_op.context_id, stream_op.stream_id),
        (SIMOP_STREAM, ctx_id, stream_id)
    );
    assert_eq!((stream_op.stream_flags, stream_op.priority), (1, 0));
    let (context_op, _) = exits[25].op.clone().unwrap();
    assert_eq!(exits[25].name, "cuCtxCreate_v2");
    assert_eq!(
        (context_op.kind, context_op.device, context_op.context_id),
        (SIMOP_CONTEXT, 0, ctx2_id)
    );
    assert_eq!(
        (context_op.stream_id, context_op.context),
        (ctx2_id + 1, ctx2)
    );
    let (priority_op, _) = exits[26].op.clone().unwrap();
    assert_eq!(
        (
            priority_op.kind,
            priority_op.context_id,
            priority_op.stream_id
        ),
        (
            SIMOP_STREAM,
            ctx2_id,
            decode(Kind::Stream, stream2 as usize).unwrap() as u32
        )
    );
    // Priorities are clamped to [-5, 0].
    assert_eq!((priority_op.stream_flags, priority_op.priority), (0, -5));
    assert!(exits[27].op.is_none());

    // cuptiGetContextId's answers: a destroyed context is no more.
    let mut id = 0u32;
    // SAFETY: valid out-pointers.
    unsafe {
        assert_eq!(simcuda_context_id(ctx, &mut id), 0);
        assert_eq!(id, ctx_id);
        assert_eq!(
            simcuda_context_id(ctx2, &mut id),
            CUPTI_ERROR_INVALID_CONTEXT
        );
        assert_eq!(
            simcuda_context_id(std::ptr::null_mut(), &mut id),
            CUPTI_ERROR_INVALID_CONTEXT
        );
        assert_eq!(
            simcuda_context_id(ctx, std::ptr::null_mut()),
            CUPTI_ERROR_INVALID_PARAMETER
        );
    }

    // cuptiGetStreamIdEx's answers.
    let mut id = 0u32;
    // SAFETY: valid out-pointer.
    unsafe {
        assert_eq!(
            simcuda_stream_id(std::ptr::null_mut(), stream, 0, &mut id),
            0
        );
        assert_eq!(id, stream_id);
        assert_eq!(simcuda_stream_id(ctx, std::ptr::null_mut(), 0, &mut id), 0);
        assert_eq!(id, set.stream_id);
        assert_eq!(
            simcuda_stream_id(std::ptr::null_mut(), std::ptr::null_mut(), 0, &mut id),
            CUPTI_ERROR_INVALID_STREAM
        );
        assert_eq!(
            simcuda_stream_id(ctx, stream, 0, std::ptr::null_mut()),
            CUPTI_ERROR_INVALID_PARAMETER
        );
    }
}

const CUDA_ERROR_INVALID_VALUE_CODE: i32 = 1;
