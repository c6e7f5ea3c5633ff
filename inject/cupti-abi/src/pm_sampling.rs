//! `cupti_pmsampling.h`: PM sampling (GPU metrics over time, per device), CUDA 13.0.

use std::ffi::{c_char, c_void};
/// `CUpti_Profiler_API`: PM sampling (`CUPTI_PROFILER_PM_SAMPLING`).
pub const PROFILER_API_PM_SAMPLING: u32 = 3;

/// `CUpti_PmSampling_TriggerMode`.
pub const PM_TRIGGER_GPU_SYSCLK_INTERVAL: u32 = 0;
pub const PM_TRIGGER_GPU_TIME_INTERVAL: u32 = 1;

/// `CUpti_PmSampling_DecodeStopReason`.
pub const PM_DECODE_STOP_OTHER: u32 = 0;
pub const PM_DECODE_STOP_COUNTER_DATA_FULL: u32 = 1;
pub const PM_DECODE_STOP_END_OF_RECORDS: u32 = 2;

/// `CUpti_PmSampling_HardwareBuffer_AppendMode`.
pub const PM_APPEND_KEEP_OLDEST: u32 = 0;
pub const PM_APPEND_KEEP_LATEST: u32 = 1;

params!(
    /// `CUpti_PmSampling_SetConfig_Params`.
    PmSamplingSetConfig {
        pm_sampling_object: *mut c_void,
        config_size: usize,
        config: *const u8,
        hardware_buffer_size: usize,
        sampling_interval: u64,
        trigger_mode: u32,
        hw_buffer_append_mode: u32,
    }
);
params!(
    /// `CUpti_PmSampling_Enable_Params`.
    PmSamplingEnable {
        device_index: usize,
        pm_sampling_object: *mut c_void,
    }
);
params!(
    /// `CUpti_PmSampling_Disable_Params`.
    PmSamplingDisable { pm_sampling_object: *mut c_void }
);
params!(
    /// `CUpti_PmSampling_Start_Params`.
    PmSamplingStart { pm_sampling_object: *mut c_void }
);
params!(
    /// `CUpti_PmSampling_Stop_Params`.
    PmSamplingStop { pm_sampling_object: *mut c_void }
);
params!(
    /// `CUpti_PmSampling_DecodeData_Params`.
    PmSamplingDecodeData {
        pm_sampling_object: *mut c_void,
        counter_data_image: *mut u8,
        counter_data_image_size: usize,
        decode_stop_reason: u32,
        overflow: u8,
    }
);
params!(
    /// `CUpti_PmSampling_GetCounterAvailability_Params`.
    PmSamplingGetCounterAvailability {
        device_index: usize,
        counter_availability_image_size: usize,
        counter_availability_image: *mut u8,
    }
);
params!(
    /// `CUpti_PmSampling_GetCounterDataSize_Params`.
    PmSamplingGetCounterDataSize {
        pm_sampling_object: *mut c_void,
        metric_names: *const *const c_char,
        num_metrics: usize,
        max_samples: u32,
        counter_data_size: usize,
    }
);
params!(
    /// `CUpti_PmSampling_CounterDataImage_Initialize_Params`.
    PmSamplingCounterDataImageInitialize {
        pm_sampling_object: *mut c_void,
        counter_data_size: usize,
        counter_data: *mut u8,
    }
);
params!(
    /// `CUpti_PmSampling_GetCounterDataInfo_Params`.
    PmSamplingGetCounterDataInfo {
        counter_data_image: *const u8,
        counter_data_image_size: usize,
        num_total_samples: usize,
        num_populated_samples: usize,
        num_completed_samples: usize,
    }
);
params!(
    /// `CUpti_PmSampling_CounterData_GetSampleInfo_Params`.
    PmSamplingCounterDataGetSampleInfo {
        pm_sampling_object: *mut c_void,
        counter_data_image: *const u8,
        counter_data_image_size: usize,
        sample_index: usize,
        start_timestamp: u64,
        end_timestamp: u64,
    }
);
