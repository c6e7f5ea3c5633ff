//! Runtime API records: the CUDA runtime's calls (`cudaLaunchKernel`, `cudaMemcpyAsync`, ...)
//! travel as [`ApiRecord`](crate::ApiRecord)s whose `function` has [`RUNTIME_FUNCTION`] set and
//! CUPTI's runtime callback id (`CUpti_runtime_api_trace_cbid`) in the bits below it. Their
//! names are not in the trace's function-name table: readers take them from
//! [`runtime_api_name`] (one table, generated from `cupti_runtime_cbid.h`). A runtime record's
//! `result` is the call's `cudaError_t`, its `correlation` an rtrace correlation id like a
//! driver call's; the driver calls it made are the driver records of the same thread inside its
//! interval, their `function` with [`IN_RUNTIME`] set.

#[path = "generated/runtime_api.rs"]
mod generated;

pub use generated::RUNTIME_API_CBID_NAMES;

/// Set in the `function` of an API record that is a runtime call (format 2.0, a later addition).
pub const RUNTIME_FUNCTION: u32 = 1 << 30;

/// Set in the `function` of a driver call's API record made inside a recorded runtime call of
/// its thread (format 2.0, a later addition); the bits below are the driver function's id, named by the trace's
/// function-name table. Calls without it were made by the program directly (or by a library
/// calling the driver), or inside a runtime call CUPTI did not report.
pub const IN_RUNTIME: u32 = 1 << 29;

/// Whether an API record's `function` is a driver call made inside a runtime call.
pub const fn in_runtime(function: u32) -> bool {
    function & (RUNTIME_FUNCTION | IN_RUNTIME) == IN_RUNTIME
}

/// An API record's `function` without [`IN_RUNTIME`]: the id the function-name table names.
pub const fn base_function(function: u32) -> u32 {
    if in_runtime(function) {
        function & !IN_RUNTIME
    } else {
        function
    }
}

/// The `function` of a runtime call with CUPTI's runtime callback id `cbid`.
pub const fn runtime_function(cbid: u32) -> u32 {
    RUNTIME_FUNCTION | (cbid & (IN_RUNTIME - 1))
}

/// CUPTI's runtime callback id of an API record's `function`, if it is a runtime call.
pub const fn runtime_cbid(function: u32) -> Option<u32> {
    if function & !(RUNTIME_FUNCTION - 1) == RUNTIME_FUNCTION {
        Some(function & (IN_RUNTIME - 1))
    } else {
        None
    }
}

/// The runtime function of callback id `cbid` as tools show it: CUPTI's name without its ABI
/// version (`cudaLaunchKernel_v7000` → `cudaLaunchKernel`, `cudaMemcpyAsync_ptsz_v7000` →
/// `cudaMemcpyAsync_ptsz`); `None` for an id this table does not know.
pub fn runtime_api_name(cbid: u32) -> Option<&'static str> {
    let name = *RUNTIME_API_CBID_NAMES.get(cbid as usize)?;
    if name.is_empty() {
        return None;
    }
    Some(match name.rfind("_v") {
        Some(i) if name[i + 2..].bytes().all(|b| b.is_ascii_digit()) && name.len() > i + 2 => {
            &name[..i]
        }
        _ => name,
    })
}

/// The name of API record function `function`: a runtime call's from [`runtime_api_name`]
/// (`None` for other functions, whose names the trace's function-name table holds).
pub fn runtime_function_name(function: u32) -> Option<&'static str> {
    runtime_api_name(runtime_cbid(function)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_ids() {
        assert_eq!(RUNTIME_API_CBID_NAMES.len(), 523);
        assert_eq!(runtime_api_name(211), Some("cudaLaunchKernel"));
        assert_eq!(runtime_api_name(214), Some("cudaLaunchKernel_ptsz"));
        assert_eq!(runtime_api_name(20), Some("cudaMalloc"));
        assert_eq!(runtime_api_name(0), None);
        assert_eq!(runtime_api_name(523), None);
        let f = runtime_function(211);
        assert_eq!(f, 0x4000_00d3);
        assert_eq!(runtime_cbid(f), Some(211));
        assert_eq!(runtime_cbid(211), None);
        assert_eq!(runtime_cbid(u32::MAX), None);
        assert_eq!(runtime_function_name(f), Some("cudaLaunchKernel"));
        assert_eq!(runtime_function_name(3), None);
        assert!(in_runtime(3 | IN_RUNTIME) && !in_runtime(3) && !in_runtime(f));
        assert_eq!(base_function(3 | IN_RUNTIME), 3);
        assert_eq!(base_function(f), f);
        // Every name is a runtime function's.
        assert!(RUNTIME_API_CBID_NAMES[1..]
            .iter()
            .all(|n| n.starts_with("cuda") || n.starts_with("__cuda")));
    }
}
