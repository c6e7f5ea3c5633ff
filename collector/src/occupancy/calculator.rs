//! The CUDA occupancy calculator's rules (`cuda_occupancy.h`,
//! `cudaOccMaxActiveBlocksPerMultiprocessor`, CUDA 13.0): the blocks of one launch that fit
//! on an SM of a device, and what limits them. [`crate::occupancy`] describes the rules and
//! builds on this the launch statistics and occupancy the report shows.

use rtrace_format::{attr, DeviceInfo};
use std::fmt;

/// The shared memory / L1 split an SM is assumed to run the kernel with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Carveout {
    /// The driver's default: the SM's maximum shared memory.
    #[default]
    Default,
    /// This percentage (0..=100) of the SM's maximum shared memory, rounded up
    /// to a size the architecture offers (`cudaFuncAttributePreferredSharedMemoryCarveout`).
    Percent(i32),
}

/// Why theoretical occupancy could not be computed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OccupancyError {
    /// The launch or the device description is not valid input (a block of no
    /// threads, a carveout outside 0..=100, a device limit that is not positive).
    InvalidInput(String),
    /// The calculator does not know this compute capability.
    UnknownDevice(i32, i32),
    /// The device description lacks an attribute the calculation needs.
    MissingAttribute(&'static str),
}

impl fmt::Display for OccupancyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OccupancyError::InvalidInput(why) => write!(f, "invalid input: {why}"),
            OccupancyError::UnknownDevice(major, minor) => {
                write!(f, "compute capability {major}.{minor} is not known")
            }
            OccupancyError::MissingAttribute(name) => {
                write!(f, "the device description lacks {name}")
            }
        }
    }
}

/// What limits the number of resident blocks per SM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Limiter {
    Warps,
    Registers,
    SharedMemory,
    /// The SM's resident-block limit.
    Blocks,
    Barriers,
}

impl Limiter {
    pub fn name(self) -> &'static str {
        match self {
            Limiter::Warps => "warps",
            Limiter::Registers => "registers",
            Limiter::SharedMemory => "shared memory",
            Limiter::Blocks => "blocks",
            Limiter::Barriers => "barriers",
        }
    }

    /// The `cudaOccLimitingFactor` bit.
    pub fn bit(self) -> u32 {
        match self {
            Limiter::Warps => 0x01,
            Limiter::Registers => 0x02,
            Limiter::SharedMemory => 0x04,
            Limiter::Blocks => 0x08,
            Limiter::Barriers => 0x10,
        }
    }
}

/// The calculator's "no limit" (`INT_MAX`).
pub(super) const NO_LIMIT: i64 = i32::MAX as i64;

/// `x / y` rounded up, for `x` >= 0 and `y` > 0 (without overflowing near `i64::MAX`).
pub(super) fn div_ceil(x: i64, y: i64) -> i64 {
    x / y + i64::from(x % y != 0)
}

fn round_up(x: i64, y: i64) -> i64 {
    y.saturating_mul(div_ceil(x, y))
}

/// The device properties the calculation uses (`cudaOccDeviceProp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceProps {
    pub major: i32,
    pub minor: i32,
    pub sms: i64,
    pub max_threads_per_block: i64,
    pub max_threads_per_sm: i64,
    pub registers_per_block: i64,
    pub registers_per_sm: i64,
    pub warp_size: i64,
    pub shared_memory_per_block: u64,
    pub shared_memory_per_sm: u64,
    pub shared_memory_per_block_optin: u64,
    pub reserved_shared_memory_per_block: u64,
}

impl DeviceProps {
    /// The properties from `info`'s attributes, checked as the calculator does:
    /// every limit must be positive.
    pub fn from_info(info: &DeviceInfo) -> Result<DeviceProps, OccupancyError> {
        let get = |a: i32, name: &'static str| {
            info.attribute(a)
                .ok_or(OccupancyError::MissingAttribute(name))
        };
        let props = DeviceProps {
            major: get(attr::COMPUTE_CAPABILITY_MAJOR, "COMPUTE_CAPABILITY_MAJOR")?,
            minor: get(attr::COMPUTE_CAPABILITY_MINOR, "COMPUTE_CAPABILITY_MINOR")?,
            sms: get(attr::MULTIPROCESSOR_COUNT, "MULTIPROCESSOR_COUNT")?.into(),
            max_threads_per_block: get(attr::MAX_THREADS_PER_BLOCK, "MAX_THREADS_PER_BLOCK")?
                .into(),
            max_threads_per_sm: get(
                attr::MAX_THREADS_PER_MULTIPROCESSOR,
                "MAX_THREADS_PER_MULTIPROCESSOR",
            )?
            .into(),
            registers_per_block: get(attr::MAX_REGISTERS_PER_BLOCK, "MAX_REGISTERS_PER_BLOCK")?
                .into(),
            registers_per_sm: get(
                attr::MAX_REGISTERS_PER_MULTIPROCESSOR,
                "MAX_REGISTERS_PER_MULTIPROCESSOR",
            )?
            .into(),
            warp_size: get(attr::WARP_SIZE, "WARP_SIZE")?.into(),
            shared_memory_per_block: bytes(get(
                attr::MAX_SHARED_MEMORY_PER_BLOCK,
                "MAX_SHARED_MEMORY_PER_BLOCK",
            )?),
            shared_memory_per_sm: bytes(get(
                attr::MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
                "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",
            )?),
            // Optional in the calculator (0 when unknown), as in older drivers.
            shared_memory_per_block_optin: bytes(
                info.attribute(attr::MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
                    .unwrap_or(0),
            ),
            reserved_shared_memory_per_block: bytes(
                info.attribute(attr::RESERVED_SHARED_MEMORY_PER_BLOCK)
                    .unwrap_or(0),
            ),
        };
        let positive = [
            ("MAX_THREADS_PER_BLOCK", props.max_threads_per_block),
            ("MAX_THREADS_PER_MULTIPROCESSOR", props.max_threads_per_sm),
            ("MAX_REGISTERS_PER_BLOCK", props.registers_per_block),
            ("MAX_REGISTERS_PER_MULTIPROCESSOR", props.registers_per_sm),
            ("WARP_SIZE", props.warp_size),
            (
                "MAX_SHARED_MEMORY_PER_BLOCK",
                props.shared_memory_per_block as i64,
            ),
            (
                "MAX_SHARED_MEMORY_PER_MULTIPROCESSOR",
                props.shared_memory_per_sm as i64,
            ),
            ("MULTIPROCESSOR_COUNT", props.sms),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v <= 0) {
            return Err(OccupancyError::InvalidInput(format!(
                "the device's {name} is not positive"
            )));
        }
        if props.max_threads_per_sm < props.warp_size {
            return Err(OccupancyError::InvalidInput(
                "the device's MAX_THREADS_PER_MULTIPROCESSOR is smaller than its WARP_SIZE".into(),
            ));
        }
        Ok(props)
    }
}

fn bytes(v: i32) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// The function attributes the calculation uses.
#[derive(Clone, Copy, Debug)]
pub(super) struct Function {
    pub(super) registers: i64,
    pub(super) static_shared_memory: u64,
}

/// The calculator's answer for one launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Blocks {
    pub(super) active: u32,
    pub(super) limit_registers: i64,
    pub(super) limit_shared_memory: i64,
    pub(super) limit_warps: i64,
    pub(super) limit_blocks: i64,
    pub(super) limit_barriers: i64,
    pub(super) limiters: Vec<Limiter>,
    pub(super) allocated_registers: u64,
    pub(super) allocated_shared_memory: u64,
    pub(super) shared_memory_configuration: u64,
}

/// Per-architecture constants.
struct Arch {
    /// Registers are allocated to a warp in units of this many.
    register_granularity: i64,
    max_registers_per_thread: i64,
    sub_partitions: i64,
    /// Resident blocks per SM.
    max_blocks: i64,
    /// Shared memory is allocated to a block in units of this many bytes.
    shared_memory_granularity: i64,
    /// Block barriers per block slot (9.0 on; 0 before: not a limit).
    barriers_per_block_slot: i64,
}

fn arch(major: i32, minor: i32) -> Result<Arch, OccupancyError> {
    let unknown = Err(OccupancyError::UnknownDevice(major, minor));
    let max_blocks = match (major, minor) {
        (3, _) => 16,
        (5 | 6, _) => 32,
        (7, 5) => 16,
        (7, _) => 32,
        (8, 0) => 32,
        (8, 9) => 24,
        (8, _) => 16,
        (9, _) => 32,
        (10, 1) => 24,
        (10, _) => 32,
        (11, 0) => 24,
        (11, _) => 32,
        (12, _) => 24,
        _ => return unknown,
    };
    let barriers_per_block_slot = match (major, minor) {
        (..=8, _) => 0,
        (10, 1) | (11, 0) | (12, _) => 1,
        _ => 2,
    };
    Ok(Arch {
        register_granularity: 256,
        max_registers_per_thread: if major <= 6 { 255 } else { 256 },
        sub_partitions: if (major, minor) == (6, 0) { 2 } else { 4 },
        max_blocks,
        shared_memory_granularity: if major >= 8 { 128 } else { 256 },
        barriers_per_block_slot,
    })
}

const KIB: u64 = 1024;

/// The shared-memory sizes per SM (KiB) the architecture can be configured to
/// (7.0 on); a requested size is rounded up to the next one.
fn carveout_sizes(major: i32, minor: i32) -> Result<&'static [u64], OccupancyError> {
    const VOLTA: &[u64] = &[0, 8, 16, 32, 64, 96];
    const TURING: &[u64] = &[32, 64];
    const GA100: &[u64] = &[0, 8, 16, 32, 64, 100, 132, 164];
    const GA10X: &[u64] = &[0, 8, 16, 32, 64, 100];
    const GH100: &[u64] = &[0, 8, 16, 32, 64, 100, 132, 164, 196, 228];
    Ok(match (major, minor) {
        (7, 5) => TURING,
        (7, _) => VOLTA,
        (8, 0 | 7) => GA100,
        (8, _) => GA10X,
        (9, _) => GH100,
        (10 | 11, 0 | 1 | 3) => GH100,
        (12, 0 | 1) => GA10X,
        _ => return Err(OccupancyError::UnknownDevice(major, minor)),
    })
}

/// `size` rounded up to a configurable shared-memory size (7.0 on).
fn align_carveout(size: u64, p: &DeviceProps) -> Result<u64, OccupancyError> {
    carveout_sizes(p.major, p.minor)?
        .iter()
        .map(|k| k * KIB)
        .find(|&s| size <= s)
        .ok_or_else(|| {
            OccupancyError::InvalidInput(format!(
                "{size} bytes of shared memory per SM is more than compute capability {}.{} offers",
                p.major, p.minor
            ))
        })
}

/// The shared memory per SM the user's preference asks for.
fn preferred_shared_memory(p: &DeviceProps, carveout: Carveout) -> Result<u64, OccupancyError> {
    if p.major >= 7 {
        let size = match carveout {
            Carveout::Default => p.shared_memory_per_sm,
            Carveout::Percent(pc) if (0..=100).contains(&pc) => {
                pc as u64 * p.shared_memory_per_sm / 100
            }
            Carveout::Percent(pc) => {
                return Err(OccupancyError::InvalidInput(format!(
                    "carveout {pc}% is not in 0..=100"
                )))
            }
        };
        return align_carveout(size, p);
    }
    // Before Volta the carveout does not apply; with no cache preference Kepler,
    // Maxwell and Pascal give blocks all of the SM's shared memory.
    match p.major {
        3 | 5 | 6 => Ok(p.shared_memory_per_sm),
        _ => Err(OccupancyError::UnknownDevice(p.major, p.minor)),
    }
}

/// Blocks per SM the registers allow, and the registers a block is allocated.
fn registers_limit(p: &DeviceProps, a: &Arch, f: &Function, block: i64) -> (i64, u64) {
    let warps = div_ceil(block, p.warp_size);
    let per_warp = round_up(
        f.registers.saturating_mul(p.warp_size),
        a.register_granularity,
    );
    let per_block = per_warp.saturating_mul(warps);
    // The hardware checks the per-block limit as if the block's warps were spread
    // over every sub-partition at once.
    let checked = per_warp.saturating_mul(round_up(warps, a.sub_partitions));
    let limit = if p.registers_per_block < checked
        || p.registers_per_block < per_block
        || f.registers > a.max_registers_per_thread
    {
        0
    } else if per_warp > 0 {
        // Each sub-partition holds whole warps of its share of the registers.
        let warps_per_sub_partition = (p.registers_per_sm / a.sub_partitions) / per_warp;
        warps_per_sub_partition * a.sub_partitions / warps
    } else {
        NO_LIMIT
    };
    (limit, per_block.max(0) as u64)
}

/// Blocks per SM the shared memory allows, the bytes a block is allocated and
/// the shared memory per SM assumed.
fn shared_memory_limit(
    p: &DeviceProps,
    a: &Arch,
    f: &Function,
    carveout: Carveout,
    dynamic: u64,
) -> Result<(i64, u64, u64), OccupancyError> {
    let preferred = preferred_shared_memory(p, carveout)?;
    let fixed = f.static_shared_memory + p.reserved_shared_memory_per_block;
    let allocated = round_up((fixed + dynamic) as i64, a.shared_memory_granularity) as u64;
    // The launch ran, so the function had opted in to at least its dynamic size:
    // a block may use the opt-in limit when it needs more than the default one.
    let mut per_block_limit = if p.major >= 7 && fixed + dynamic > p.shared_memory_per_block {
        p.shared_memory_per_block_optin
    } else {
        p.shared_memory_per_block
    };
    if p.major >= 8 {
        per_block_limit += p.reserved_shared_memory_per_block;
    }
    if allocated > per_block_limit {
        return Ok((0, allocated, preferred));
    }
    let per_sm = if preferred >= allocated {
        preferred
    } else if p.major >= 7 {
        // A carveout smaller than one block is grown to fit it.
        align_carveout(allocated, p)?
    } else {
        p.shared_memory_per_sm
    };
    let limit = per_sm
        .checked_div(allocated)
        .map_or(NO_LIMIT, |blocks| blocks as i64);
    Ok((limit, allocated, per_sm))
}

/// `cudaOccMaxActiveBlocksPerMultiprocessor` for one launch.
pub(super) fn max_active_blocks(
    p: &DeviceProps,
    f: &Function,
    carveout: Carveout,
    block: i64,
    dynamic: u64,
) -> Result<Blocks, OccupancyError> {
    if block <= 0 {
        return Err(OccupancyError::InvalidInput(
            "the block has no threads".into(),
        ));
    }
    let a = arch(p.major, p.minor)?;
    let (mut limit_registers, allocated_registers) = registers_limit(p, &a, f, block);
    if (p.major, p.minor) == (6, 0) && limit_registers > 0 {
        // A kernel that cannot run on GP10x (4 sub-partitions) is not let run on GP100.
        let gp10x = DeviceProps { minor: 1, ..*p };
        let a10x = arch(6, 1)?;
        if registers_limit(&gp10x, &a10x, f, block).0 == 0 {
            limit_registers = 0;
        }
    }
    let limit_warps = if block > p.max_threads_per_block {
        0
    } else {
        (p.max_threads_per_sm / p.warp_size) / div_ceil(block, p.warp_size)
    };
    let limit_blocks = a.max_blocks;
    let (limit_shared_memory, allocated_shared_memory, shared_memory_configuration) =
        shared_memory_limit(p, &a, f, carveout, dynamic)?;

    let mut active = limit_registers
        .min(limit_shared_memory)
        .min(limit_warps)
        .min(limit_blocks);
    let mut limiters: Vec<Limiter> = [
        (Limiter::Warps, limit_warps),
        (Limiter::Registers, limit_registers),
        (Limiter::SharedMemory, limit_shared_memory),
        (Limiter::Blocks, limit_blocks),
    ]
    .into_iter()
    .filter(|&(_, limit)| limit == active)
    .map(|(l, _)| l)
    .collect();
    let limit_barriers = if a.barriers_per_block_slot > 0 {
        // One barrier per block.
        let barriers = limit_blocks * a.barriers_per_block_slot;
        active = active.min(barriers);
        if active == barriers {
            limiters.push(Limiter::Barriers);
        }
        barriers
    } else {
        NO_LIMIT
    };
    Ok(Blocks {
        active: active as u32,
        limit_registers,
        limit_shared_memory,
        limit_warps,
        limit_blocks,
        limit_barriers,
        limiters,
        allocated_registers,
        allocated_shared_memory,
        shared_memory_configuration,
    })
}
