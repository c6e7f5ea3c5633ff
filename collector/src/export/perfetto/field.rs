//! Field numbers of the messages written, and the enum values they take (from Perfetto's .proto
//! files).

/// `BuiltinClock.BUILTIN_CLOCK_MONOTONIC`.
pub const CLOCK_MONOTONIC: u64 = 3;
/// The id of a lane's own clock (ids 64 to 127 are a sequence's own:
/// `ClockSnapshot.Clock.clock_id`).
pub const LANE_CLOCK: u64 = 64;
/// `TracePacket.SequenceFlags`.
pub const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
pub const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
/// `TrackEvent.Type`.
pub const TYPE_SLICE_BEGIN: u64 = 1;
pub const TYPE_SLICE_END: u64 = 2;
pub const TYPE_COUNTER: u64 = 4;
/// `TrackDescriptor.ChildTracksOrdering.EXPLICIT`.
pub const ORDERING_EXPLICIT: u64 = 3;
/// `TrackDescriptor.SiblingMergeBehavior.SIBLING_MERGE_BEHAVIOR_BY_TRACK_NAME`.
pub const MERGE_BY_TRACK_NAME: u64 = 1;
/// `CounterDescriptor.Unit.UNIT_SIZE_BYTES`.
pub const UNIT_SIZE_BYTES: u64 = 3;

/// `Trace`.
pub const TRACE_PACKET: u32 = 1;
/// `TracePacket`.
pub const CLOCK_SNAPSHOT: u32 = 6;
pub const TIMESTAMP: u32 = 8;
pub const TRUSTED_PACKET_SEQUENCE_ID: u32 = 10;
pub const TRACK_EVENT: u32 = 11;
pub const INTERNED_DATA: u32 = 12;
pub const SEQUENCE_FLAGS: u32 = 13;
pub const TRACE_PACKET_DEFAULTS: u32 = 59;
pub const TRACK_DESCRIPTOR: u32 = 60;
pub const FIRST_PACKET_ON_SEQUENCE: u32 = 87;
/// `TracePacket` and `TracePacketDefaults`.
pub const TIMESTAMP_CLOCK_ID: u32 = 58;
/// `TracePacketDefaults`.
pub const TRACK_EVENT_DEFAULTS: u32 = 11;
/// `ClockSnapshot`.
pub const CLOCKS: u32 = 1;
pub const PRIMARY_TRACE_CLOCK: u32 = 2;
/// `ClockSnapshot.Clock`.
pub const CLOCK_ID: u32 = 1;
pub const CLOCK_TIMESTAMP: u32 = 2;
pub const IS_INCREMENTAL: u32 = 3;
/// `InternedData`.
pub const EVENT_NAMES: u32 = 2;
pub const DEBUG_ANNOTATION_NAMES: u32 = 3;
pub const DEBUG_ANNOTATION_STRING_VALUES: u32 = 29;
/// `EventName`, `DebugAnnotationName`, `InternedString` (its `str`: bytes).
pub const IID: u32 = 1;
pub const NAME: u32 = 2;
/// `TrackDescriptor`.
pub const UUID: u32 = 1;
pub const TRACK_NAME: u32 = 2;
pub const PROCESS: u32 = 3;
pub const THREAD: u32 = 4;
pub const PARENT_UUID: u32 = 5;
pub const COUNTER: u32 = 8;
pub const CHILD_ORDERING: u32 = 11;
pub const SIBLING_ORDER_RANK: u32 = 12;
pub const SIBLING_MERGE_BEHAVIOR: u32 = 15;
/// `ProcessDescriptor`.
pub const PROCESS_PID: u32 = 1;
pub const CMDLINE: u32 = 2;
pub const PROCESS_NAME: u32 = 6;
/// `ThreadDescriptor`.
pub const THREAD_PID: u32 = 1;
pub const TID: u32 = 2;
pub const THREAD_NAME: u32 = 5;
/// `CounterDescriptor`.
pub const UNIT: u32 = 3;
pub const UNIT_NAME: u32 = 6;
/// `TrackEvent` (and `TrackEventDefaults`: `TRACK_UUID`).
pub const DEBUG_ANNOTATIONS: u32 = 4;
pub const TYPE: u32 = 9;
pub const NAME_IID: u32 = 10;
pub const TRACK_UUID: u32 = 11;
pub const COUNTER_VALUE: u32 = 30;
pub const DOUBLE_COUNTER_VALUE: u32 = 44;
pub const FLOW_IDS: u32 = 47;
pub const TERMINATING_FLOW_IDS: u32 = 48;
/// `DebugAnnotation`.
pub const ANNOTATION_NAME_IID: u32 = 1;
pub const UINT_VALUE: u32 = 3;
pub const DOUBLE_VALUE: u32 = 5;
/// The annotation's name as a string (instead of an interned one).
pub const ANNOTATION_NAME: u32 = 10;
/// A string value interned (`InternedData.debug_annotation_string_values`).
pub const STRING_VALUE_IID: u32 = 17;
