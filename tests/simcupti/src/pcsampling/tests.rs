//! The PC Sampling API through its exported functions, on simcupti's global state (each test
//! uses contexts of its own; enabling goes around `cuptiPCSamplingEnable`'s liveness check, which
//! needs simcuda), with modules and launches fed as simcuda would report them.

use super::*;
use std::ptr::null_mut;

/// simcuda's handle of context `id`.
fn handle(id: u32) -> *mut c_void {
    (0x5100_0000_0000usize + (1 << 40) + 16 * id as usize) as *mut c_void
}

fn enable(id: u32) {
    assert_eq!(state::with(|st| st.pcs.enable(id)), CUPTI_SUCCESS);
}

fn ctx_params(id: u32) -> CtxParams {
    CtxParams {
        size: CTX_PARAMS_SIZE,
        pPriv: null_mut(),
        ctx: handle(id),
    }
}

/// A module `image` with `functions` loaded in context `ctx`.
fn load(ctx: u32, module_id: u32, image: &CStr, functions: &[(&CStr, u32)]) {
    let f: Vec<SimFunction> = functions
        .iter()
        .map(|(n, i)| SimFunction {
            id: 1000 + i,
            index: *i,
            name: n.as_ptr(),
        })
        .collect();
    let mut op = SimOp::zeroed(SIMOP_MODULE);
    op.context_id = ctx;
    op.module_id = module_id;
    op.image = image.as_ptr().cast();
    op.image_size = image.to_bytes().len() as u64;
    op.functions = f.as_ptr();
    op.function_count = f.len() as u32;
    state::with(|st| st.pcs.observe(&op));
}

fn launch(ctx: u32, name: &CStr) {
    let mut op = SimOp::zeroed(SIMOP_KERNEL);
    op.context_id = ctx;
    op.name = name.as_ptr();
    state::with(|st| st.pcs.observe(&op));
}

fn set(id: u32, entries: &mut [ConfigInfo]) -> u32 {
    let mut p = ConfigInfoParams {
        size: CONFIG_INFO_PARAMS_SIZE,
        pPriv: null_mut(),
        ctx: handle(id),
        numAttributes: entries.len(),
        pPCSamplingConfigurationInfo: entries.as_mut_ptr(),
    };
    // SAFETY: valid params.
    unsafe { cuptiPCSamplingSetConfigurationAttribute(&mut p) }
}

fn get(id: u32, entries: &mut [ConfigInfo]) -> u32 {
    let mut p = ConfigInfoParams {
        size: CONFIG_INFO_PARAMS_SIZE,
        pPriv: null_mut(),
        ctx: handle(id),
        numAttributes: entries.len(),
        pPCSamplingConfigurationInfo: entries.as_mut_ptr(),
    };
    // SAFETY: valid params.
    unsafe { cuptiPCSamplingGetConfigurationAttribute(&mut p) }
}

fn attr(t: u32, w0: u64, w1: u64) -> ConfigInfo {
    ConfigInfo {
        attributeType: t,
        attributeStatus: 999,
        attributeData: [w0, w1, 0],
    }
}

/// A client-side `CUpti_PCSamplingData` with room for `n` PCs of up to `reasons` reasons.
struct Buf {
    data: Box<SamplingData>,
    _pcs: Vec<PcData>,
    _reasons: Vec<Vec<StallReason>>,
}

impl Buf {
    fn new(n: usize, reasons: usize) -> Buf {
        let mut rs: Vec<Vec<StallReason>> = (0..n)
            .map(|_| vec![StallReason::default(); reasons])
            .collect();
        let mut pcs: Vec<PcData> = rs
            .iter_mut()
            .map(|r| PcData {
                size: size_of::<PcData>(),
                cubinCrc: 0,
                pcOffset: 0,
                functionIndex: 0,
                pad: 0,
                functionName: null_mut(),
                stallReasonCount: 0,
                stallReason: r.as_mut_ptr(),
                correlationId: 7,
            })
            .collect();
        let data = Box::new(SamplingData {
            size: size_of::<SamplingData>(),
            collectNumPcs: n,
            totalSamples: 0,
            droppedSamples: 0,
            totalNumPcs: 0,
            remainingNumPcs: 0,
            rangeId: 9,
            pPcData: pcs.as_mut_ptr(),
            nonUsrKernelsTotalSamples: 0,
            hardwareBufferFull: 1,
        });
        Buf {
            data,
            _pcs: pcs,
            _reasons: rs,
        }
    }

    fn ptr(&mut self) -> *mut SamplingData {
        &mut *self.data
    }

    /// The copied PCs: `(crc, offset, index, name, [(reason, samples)])`; frees the names.
    #[allow(clippy::type_complexity)]
    fn pcs(&self) -> Vec<(u64, u64, u32, String, Vec<(u32, u32)>)> {
        (0..self.data.totalNumPcs)
            .map(|i| {
                // SAFETY: the records simcupti wrote.
                let r = unsafe { &*self.data.pPcData.add(i) };
                assert_eq!(r.correlationId, 0);
                // SAFETY: a malloc'ed NUL-terminated copy, ours to free.
                let name = unsafe { CStr::from_ptr(r.functionName) }
                    .to_string_lossy()
                    .into_owned();
                unsafe { libc::free(r.functionName.cast()) };
                // SAFETY: `stallReasonCount` entries written.
                let rs = unsafe { std::slice::from_raw_parts(r.stallReason, r.stallReasonCount) };
                let rs = rs
                    .iter()
                    .map(|s| (s.pcSamplingStallReasonIndex, s.samples))
                    .collect();
                (r.cubinCrc, r.pcOffset, r.functionIndex, name, rs)
            })
            .collect()
    }
}

fn get_data(id: u32, buf: *mut SamplingData) -> u32 {
    let mut p = GetDataParams {
        size: GET_DATA_PARAMS_SIZE,
        pPriv: null_mut(),
        ctx: handle(id),
        pcSamplingData: buf.cast(),
    };
    // SAFETY: valid params.
    unsafe { cuptiPCSamplingGetData(&mut p) }
}

fn disable(id: u32) -> u32 {
    let mut p = ctx_params(id);
    // SAFETY: valid params.
    unsafe { cuptiPCSamplingDisable(&mut p) }
}

const IMAGE: &CStr = c"simcuda-module\nkernel k 3000\nkernel other 1000\n";

#[test]
fn layout_sizes_match_the_header() {
    assert_eq!(size_of::<PcData>(), 64);
    assert_eq!(size_of::<SamplingData>(), 80);
    assert_eq!(size_of::<ConfigInfo>(), 32);
    assert_eq!(launch_total(), 134);
    // The CRC is cuptiGetCubinCrc's (CRC-32 of "123456789" is 0xCBF43926).
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    assert_eq!(context_id_of(handle(5)), Some(5));
    assert_eq!(context_id_of(null_mut()), None);
    assert_eq!(context_id_of(handle(5).wrapping_byte_add(8)), None);
}

#[test]
fn stall_reason_table() {
    let id = 900;
    let mut n = 0usize;
    let mut p = GetNumStallReasonsParams {
        size: GET_NUM_STALL_REASONS_PARAMS_SIZE,
        pPriv: null_mut(),
        ctx: handle(id),
        numStallReasons: &mut n,
    };
    // SAFETY: valid params, throughout.
    unsafe {
        assert_eq!(
            cuptiPCSamplingGetNumStallReasons(&mut p),
            CUPTI_ERROR_INVALID_OPERATION
        );
        enable(id);
        assert_eq!(cuptiPCSamplingGetNumStallReasons(&mut p), CUPTI_SUCCESS);
        assert_eq!(n, 9);
        p.size = GET_NUM_STALL_REASONS_PARAMS_SIZE - 1;
        assert_eq!(
            cuptiPCSamplingGetNumStallReasons(&mut p),
            CUPTI_ERROR_INVALID_PARAMETER
        );
        assert_eq!(
            cuptiPCSamplingGetNumStallReasons(null_mut()),
            CUPTI_ERROR_INVALID_PARAMETER
        );
    }
    let mut index = [0u32; 9];
    let mut names = [[0x55u8; STALL_REASON_STRING_SIZE]; 9];
    let mut ptrs: Vec<*mut c_char> = names.iter_mut().map(|b| b.as_mut_ptr().cast()).collect();
    let mut q = GetStallReasonsParams {
        size: GET_STALL_REASONS_PARAMS_SIZE,
        pPriv: null_mut(),
        ctx: handle(id),
        numStallReasons: 8,
        stallReasonIndex: index.as_mut_ptr(),
        stallReasons: ptrs.as_mut_ptr(),
    };
    // SAFETY: valid params.
    unsafe {
        assert_eq!(
            cuptiPCSamplingGetStallReasons(&mut q),
            CUPTI_ERROR_INVALID_PARAMETER
        );
        q.numStallReasons = 9;
        assert_eq!(cuptiPCSamplingGetStallReasons(&mut q), CUPTI_SUCCESS);
    }
    assert_eq!(index, [0, 14, 15, 20, 21, 28, 30, 36, 1]);
    let got: Vec<String> = names
        .iter()
        .map(|b| {
            CStr::from_bytes_until_nul(b)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(got[1], "smsp__pcsamp_warps_issue_stalled_long_scoreboard");
    assert_eq!(got[8], "smsp__pcsamp_samples_data_dropped");
    assert_eq!(got[7], "smsp__pcsamp_warps_issue_stalled_wait");
    assert_eq!(disable(id), CUPTI_SUCCESS);
    assert_eq!(disable(id), CUPTI_ERROR_INVALID_OPERATION);
}

#[test]
fn configuration_defaults_and_checks() {
    let id = 901;
    let mut e = [attr(ATTR_SAMPLING_PERIOD, 0, 0)];
    assert_eq!(get(id, &mut e), CUPTI_ERROR_INVALID_OPERATION);
    assert_eq!(set(id, &mut e), CUPTI_ERROR_INVALID_OPERATION);
    enable(id);
    let mut all: Vec<ConfigInfo> = (1..=9).map(|t| attr(t, 0, 0)).collect();
    assert_eq!(get(id, &mut all), CUPTI_SUCCESS);
    let words: Vec<u64> = all.iter().map(|e| e.attributeData[0]).collect();
    assert_eq!(words, [11, 9, 1_048_576, 536_870_912, 1, 0, 1, 0, 100]);
    assert!(all.iter().all(|e| e.attributeStatus == CUPTI_SUCCESS));

    // A bad period: that entry's status, nothing applied.
    let mut e = [
        attr(ATTR_COLLECTION_MODE, 2, 0),
        attr(ATTR_SAMPLING_PERIOD, 4, 0),
    ];
    assert_eq!(set(id, &mut e), CUPTI_ERROR_INVALID_PARAMETER);
    assert_eq!(
        (e[0].attributeStatus, e[1].attributeStatus),
        (CUPTI_SUCCESS, CUPTI_ERROR_INVALID_PARAMETER)
    );
    let mut m = [attr(ATTR_COLLECTION_MODE, 0, 0)];
    assert_eq!(get(id, &mut m), CUPTI_SUCCESS);
    assert_eq!(m[0].attributeData[0], 1);
    let bad_reason = [14u32, 2];
    let mut e = [attr(ATTR_STALL_REASON, 2, bad_reason.as_ptr() as u64)];
    assert_eq!(set(id, &mut e), CUPTI_ERROR_INVALID_PARAMETER);
    let mut e = [attr(ATTR_OUTPUT_DATA_FORMAT, 2, 0)];
    assert_eq!(set(id, &mut e), CUPTI_ERROR_INVALID_PARAMETER);
    let mut e = [attr(0, 0, 0)];
    assert_eq!(set(id, &mut e), CUPTI_ERROR_INVALID_PARAMETER);

    let reasons = [30u32, 14];
    let mut e = [
        attr(ATTR_SAMPLING_PERIOD, 31, 0),
        attr(ATTR_STALL_REASON, 2, reasons.as_ptr() as u64),
        attr(ATTR_WORKER_THREAD_PERIODIC_SLEEP_SPAN, 5, 0),
    ];
    assert_eq!(set(id, &mut e), CUPTI_SUCCESS);
    let mut back = [0u32; 2];
    let mut e = [
        attr(ATTR_SAMPLING_PERIOD, 0, 0),
        attr(ATTR_STALL_REASON, 2, back.as_mut_ptr() as u64),
        attr(ATTR_WORKER_THREAD_PERIODIC_SLEEP_SPAN, 0, 0),
    ];
    assert_eq!(get(id, &mut e), CUPTI_SUCCESS);
    assert_eq!(
        (
            e[0].attributeData[0],
            e[1].attributeData[0],
            e[2].attributeData[0]
        ),
        (31, 2, 5)
    );
    assert_eq!(back, [30, 14]);
    // Start/stop need ENABLE_START_STOP_CONTROL.
    let mut p = ctx_params(id);
    // SAFETY: valid params.
    unsafe {
        assert_eq!(cuptiPCSamplingStart(&mut p), CUPTI_ERROR_INVALID_OPERATION);
        assert_eq!(cuptiPCSamplingStop(&mut p), CUPTI_ERROR_INVALID_OPERATION);
        p.size = CTX_PARAMS_SIZE - 8;
        assert_eq!(cuptiPCSamplingStart(&mut p), CUPTI_ERROR_INVALID_PARAMETER);
        assert_eq!(cuptiPCSamplingEnable(&mut p), CUPTI_ERROR_INVALID_PARAMETER);
        assert_eq!(
            cuptiPCSamplingEnable(null_mut()),
            CUPTI_ERROR_INVALID_PARAMETER
        );
    }
    assert_eq!(disable(id), CUPTI_SUCCESS);
}

#[test]
fn two_launches_exact_counts_and_partial_get_data() {
    let id = 902;
    let crc = crc32(IMAGE.to_bytes());
    load(id, 50, IMAGE, &[(c"k", 0), (c"other", 1)]);
    enable(id);
    // Not configured yet: no samples.
    launch(id, c"k");
    assert_eq!(state::with(|st| st.pcs.pending(id)), 0);
    let mut e = [attr(ATTR_SAMPLING_PERIOD, 8, 0)];
    assert_eq!(set(id, &mut e), CUPTI_SUCCESS);
    launch(id, c"k");
    launch(id, c"k");
    launch(id, c"not_in_any_module");
    launch(id + 1, c"k"); // another context: not sampled

    // GetData errors.
    assert_eq!(get_data(id, null_mut()), CUPTI_ERROR_INVALID_PARAMETER);
    let mut small = Buf::new(1, 9);
    small.data.size = SAMPLING_DATA_MIN_SIZE - 1;
    assert_eq!(get_data(id, small.ptr()), CUPTI_ERROR_INVALID_PARAMETER);
    assert_eq!(get_data(id + 1, small.ptr()), CUPTI_ERROR_INVALID_OPERATION);

    let mut b = Buf::new(3, 9);
    assert_eq!(get_data(id, b.ptr()), CUPTI_SUCCESS);
    let d = *b.data;
    assert_eq!((d.totalNumPcs, d.remainingNumPcs), (3, 1));
    assert_eq!(
        (d.totalSamples, d.nonUsrKernelsTotalSamples),
        (3 * 134, 134)
    );
    assert_eq!(
        (d.droppedSamples, d.rangeId, d.hardwareBufferFull),
        (0, 0, 0)
    );
    let pc = |k: u32| {
        (
            crc,
            u64::from(32 * k),
            0,
            "k".to_string(),
            vec![
                (14, 2 * (k + 1) * 10),
                (15, 2 * (k + 1) * 5),
                (28, 2),
                (30, 2 * (4 - k) * 3),
            ],
        )
    };
    assert_eq!(b.pcs(), vec![pc(0), pc(1), pc(2)]);

    let mut rest = Buf::new(8, 9);
    assert_eq!(get_data(id, rest.ptr()), CUPTI_SUCCESS);
    let d = *rest.data;
    assert_eq!((d.totalNumPcs, d.remainingNumPcs), (1, 0));
    assert_eq!((d.totalSamples, d.nonUsrKernelsTotalSamples), (0, 0));
    assert_eq!(rest.pcs(), vec![pc(3)]);
    assert_eq!(disable(id), CUPTI_SUCCESS);
}

#[test]
fn selected_reasons_and_disable_fills_the_configured_buffer() {
    let id = 903;
    let image = c"simcuda-module\nkernel a 1\nkernel k 3000\n";
    let crc = crc32(image.to_bytes());
    load(id, 60, IMAGE, &[(c"k", 0)]);
    load(id, 61, image, &[(c"a", 0), (c"k", 1)]); // the later module wins
    enable(id);
    let mut out = Buf::new(2, 1);
    let reasons = [30u32];
    let mut e = [
        attr(ATTR_STALL_REASON, 1, reasons.as_ptr() as u64),
        attr(ATTR_SAMPLING_DATA_BUFFER, out.ptr() as u64, 0),
    ];
    assert_eq!(set(id, &mut e), CUPTI_SUCCESS);
    launch(id, c"k");
    assert_eq!(state::with(|st| st.pcs.pending(id)), 4);
    assert_eq!(disable(id), CUPTI_SUCCESS);
    let d = *out.data;
    // Two copied, the other two discarded; the total counts every reason.
    assert_eq!(
        (d.totalNumPcs, d.remainingNumPcs, d.totalSamples),
        (2, 2, 134)
    );
    assert_eq!(
        out.pcs(),
        vec![
            (crc, 0, 1, "k".to_string(), vec![(30, 12)]),
            (crc, 32, 1, "k".to_string(), vec![(30, 9)])
        ]
    );
    assert!(!state::with(|st| st.pcs.enabled(id)));
    // Enabled again: defaults, nothing pending.
    enable(id);
    assert_eq!(state::with(|st| st.pcs.pending(id)), 0);
    assert_eq!(disable(id), CUPTI_SUCCESS);
}

#[test]
fn start_stop_control() {
    let id = 904;
    load(id, 70, IMAGE, &[(c"k", 0)]);
    enable(id);
    let mut e = [attr(ATTR_ENABLE_START_STOP_CONTROL, 1, 0)];
    assert_eq!(set(id, &mut e), CUPTI_SUCCESS);
    launch(id, c"k");
    assert_eq!(state::with(|st| st.pcs.pending(id)), 0);
    let mut p = ctx_params(id);
    // SAFETY: valid params.
    assert_eq!(unsafe { cuptiPCSamplingStart(&mut p) }, CUPTI_SUCCESS);
    launch(id, c"k");
    // SAFETY: valid params.
    assert_eq!(unsafe { cuptiPCSamplingStop(&mut p) }, CUPTI_SUCCESS);
    launch(id, c"k");
    let mut b = Buf::new(8, 9);
    assert_eq!(get_data(id, b.ptr()), CUPTI_SUCCESS);
    assert_eq!((b.data.totalNumPcs, b.data.totalSamples), (4, 134));
    b.pcs();
    // Context destroyed while enabled: disabled, modules forgotten.
    // SAFETY: no buffer configured.
    state::with(|st| unsafe { st.pcs.context_destroyed(id) });
    assert_eq!(disable(id), CUPTI_ERROR_INVALID_OPERATION);
}
