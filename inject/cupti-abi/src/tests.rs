//! The structures' sizes against the headers' `STRUCT_SIZE`s.
use super::*;

/// `CUPTI_PROFILER_STRUCT_SIZE` on LP64 Linux, counted from the headers' fields.
#[test]
fn sizes_are_the_headers() {
    assert_eq!(HostInitialize::SIZE, 48);
    assert_eq!(HostDeinitialize::SIZE, 24);
    assert_eq!(HostGetSupportedChips::SIZE, 32);
    assert_eq!(HostGetBaseMetrics::SIZE, 48);
    assert_eq!(HostGetMetricProperties::SIZE, 60);
    assert_eq!(HostGetRangeName::SIZE, 56);
    assert_eq!(HostEvaluateToGpuValues::SIZE, 72);
    assert_eq!(HostConfigAddMetrics::SIZE, 40);
    assert_eq!(HostGetConfigImageSize::SIZE, 32);
    assert_eq!(HostGetConfigImage::SIZE, 40);
    assert_eq!(HostGetNumOfPasses::SIZE, 40);
    assert_eq!(ProfilerInitialize::SIZE, 16);
    assert_eq!(ProfilerDeInitialize::SIZE, 16);
    assert_eq!(GetCounterAvailability::SIZE, 40);
    assert_eq!(DeviceSupported::SIZE, 52);
    assert_eq!(DeviceGetChipName::SIZE, 32);
    assert_eq!(RangeProfilerEnable::SIZE, 32);
    assert_eq!(RangeProfilerDisable::SIZE, 24);
    assert_eq!(RangeProfilerSetConfig::SIZE, 90);
    assert_eq!(RangeProfilerStart::SIZE, 24);
    assert_eq!(RangeProfilerStop::SIZE, 41);
    assert_eq!(RangeProfilerPushRange::SIZE, 32);
    assert_eq!(RangeProfilerPopRange::SIZE, 24);
    assert_eq!(RangeProfilerDecodeData::SIZE, 32);
    assert_eq!(RangeProfilerGetCounterDataSize::SIZE, 64);
    assert_eq!(RangeProfilerCounterDataImageInitialize::SIZE, 40);
    assert_eq!(RangeProfilerGetCounterDataInfo::SIZE, 40);
    assert_eq!(RangeProfilerCounterDataGetRangeInfo::SIZE, 56);
}

#[test]
fn sass_metrics_sizes_are_the_headers() {
    // CUpti_*_STRUCT_SIZE of cupti_sass_metrics.h (CUPTI 13.0), printed by a C program.
    assert_eq!(SassMetricsGetNumOfMetrics::SIZE, 32);
    assert_eq!(SassMetricsGetMetrics::SIZE, 40);
    assert_eq!(SassMetricsGetProperties::SIZE, 56);
    assert_eq!(SassMetricsSetConfig::SIZE, 36);
    assert_eq!(SassMetricsUnsetConfig::SIZE, 20);
    assert_eq!(SassMetricsEnable::SIZE, 25);
    assert_eq!(SassMetricsDisable::SIZE, 32);
    assert_eq!(SassMetricsGetDataProperties::SIZE, 40);
    assert_eq!(SassMetricsFlushData::HEADER_SIZE, 40);
    assert_eq!(SassMetricsFlushData::with_header_size().struct_size, 40);
    assert_eq!(std::mem::size_of::<SassMetricsFlushData>(), 48);
    assert_eq!(std::mem::size_of::<SassMetricsData>(), 48);
    assert_eq!(std::mem::offset_of!(SassMetricsData, pc_offset), 32);
    assert_eq!(std::mem::offset_of!(SassMetricsData, instance_values), 40);
    assert_eq!(std::mem::size_of::<SassMetricsConfig>(), 16);
    assert_eq!(std::mem::size_of::<SassMetricDetails>(), 24);
    assert_eq!(std::mem::size_of::<SassMetricsInstanceValue>(), 16);
}

#[test]
fn new_sets_the_size_and_zeroes_the_rest() {
    let p = RangeProfilerStop::new();
    assert_eq!(p.struct_size, 41);
    assert!(p.p_priv.is_null() && p.range_profiler_object.is_null());
    assert_eq!((p.pass_index, p.is_all_pass_submitted), (0, 0));
}
