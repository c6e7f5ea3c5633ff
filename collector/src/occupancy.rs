//! Launch statistics and theoretical occupancy of kernel launches, as Nsight
//! Compute's "Launch Statistics" and "Occupancy" sections give them, computed
//! from a kernel record (block, grid, registers, shared memory) and the
//! device's attributes ([`DeviceInfo`]).
//!
//! The rules are those of the CUDA occupancy calculator (`cuda_occupancy.h`,
//! `cudaOccMaxActiveBlocksPerMultiprocessor`, CUDA 13.0), reimplemented here:
//! blocks per SM are limited by
//! - registers: a warp's registers (`registers × warp size`) are allocated in
//!   units of 256; an SM's registers are split evenly between its 4
//!   sub-partitions (2 on GP100), each holding whole warps; a block that needs
//!   more than the per-block limit (counting its warps rounded up to a
//!   multiple of the sub-partitions) or more than 255/256 registers per thread
//!   cannot run;
//! - shared memory: static + dynamic + the driver's reservation per block,
//!   rounded up to 128 bytes (256 before compute capability 8.0), against the
//!   SM's shared-memory carveout (the largest by default; a carveout
//!   percentage is rounded up to the sizes the architecture offers, and a
//!   carveout too small for one block is grown to fit it); a block over the
//!   per-block limit (the opt-in limit when it uses more than the default
//!   limit, plus the reservation from 8.0 on) cannot run;
//! - warps: the SM's warp slots over the block's warps (0 for a block larger
//!   than the device allows);
//! - blocks: the architecture's resident-block limit per SM;
//! - barriers (9.0 on): one barrier per block, 2 per block slot (1 on 10.1,
//!   11.0 and 12.x), so never below the block slots (Nsight Compute shows 32 on
//!   an H100/H200 where the calculator counts 64).
//!
//! The function is assumed as the runtime describes one from its attributes:
//! partitioned global caching off, its opt-in dynamic shared-memory limit at
//! least the launch's dynamic shared memory (the launch ran), one block
//! barrier, no virtual resources, no thread limit below the device's.
//! Architectures: compute capability 3.x, 5.x, 6.x, 7.x, 8.x, 9.x, 10.0/10.1/10.3,
//! 11.0/11.1/11.3, 12.0/12.1, as `cuda_occupancy.h` of CUDA 13.0; others give
//! [`OccupancyError::UnknownDevice`].
//!
//! Validated against the header itself: `collector/tests/data/occupancy_table.csv`
//! (made by `tools/occupancy-table.sh`) and, on demand, the full H100 grid.

use crate::gpu_summary::Hundredths;
use crate::model::Trace;
use rtrace_format::{attr, DeviceInfo, KernelRecord};
use std::collections::HashMap;
use std::fmt;

/// A kernel launch's configuration: what occupancy depends on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KernelLaunch {
    pub grid: [i32; 3],
    pub block: [i32; 3],
    pub registers_per_thread: u32,
    /// Bytes per block.
    pub static_shared_memory: u32,
    /// Bytes per block.
    pub dynamic_shared_memory: u32,
}

impl From<&KernelRecord> for KernelLaunch {
    fn from(k: &KernelRecord) -> Self {
        KernelLaunch {
            grid: k.grid,
            block: k.block,
            registers_per_thread: k.registers_per_thread,
            static_shared_memory: k.static_shared_memory,
            dynamic_shared_memory: k.dynamic_shared_memory,
        }
    }
}

impl KernelLaunch {
    /// Threads per block (0 if a dimension is not positive).
    pub fn block_size(&self) -> u64 {
        product(self.block)
    }

    /// Blocks in the grid (0 if a dimension is not positive).
    pub fn grid_size(&self) -> u64 {
        product(self.grid)
    }
}

fn product(d: [i32; 3]) -> u64 {
    d.iter()
        .map(|&x| u64::try_from(x).unwrap_or(0))
        .fold(1, u64::saturating_mul)
}

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

/// Theoretical occupancy of one launch on one device, per SM.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Theoretical {
    /// Shared memory per SM the calculation assumed (the carveout, grown to
    /// fit one block where needed), bytes.
    pub shared_memory_configuration: u64,
    /// Registers allocated to a block (whole warps, in allocation units).
    pub allocated_registers_per_block: u64,
    /// Shared memory allocated to a block (static + dynamic + driver, rounded
    /// up to the allocation granularity), bytes.
    pub allocated_shared_memory_per_block: u64,
    /// Blocks per SM the registers allow; `None`: no limit (no registers used).
    pub block_limit_registers: Option<u32>,
    /// Blocks per SM the shared memory allows; `None`: no limit (none used).
    pub block_limit_shared_memory: Option<u32>,
    /// Blocks per SM the warp slots allow.
    pub block_limit_warps: u32,
    /// The SM's resident-block limit.
    pub block_limit_sm: u32,
    /// Blocks per SM the block barriers allow (9.0 on); `None` before.
    pub block_limit_barriers: Option<u32>,
    /// The smallest limit: blocks resident per SM (0: the launch cannot run).
    pub active_blocks_per_sm: u32,
    pub warps_per_block: u32,
    /// `active_blocks_per_sm × warps_per_block`.
    pub active_warps_per_sm: u32,
    pub max_warps_per_sm: u32,
    /// `active_warps_per_sm / max_warps_per_sm`, %, rounded half to even.
    pub occupancy_percent: Hundredths,
    /// Grid size over `active_blocks_per_sm × SMs`, rounded half to even; `None`
    /// when no block fits.
    pub waves_per_sm: Option<Hundredths>,
    /// Every limit equal to `active_blocks_per_sm` (as the calculator's
    /// limiting-factor bits).
    pub limiters: Vec<Limiter>,
}

impl Theoretical {
    /// What to name as the limit, for people: the limiters when occupancy is
    /// below 100%, `None` at 100%. Barriers are left out: one barrier per block
    /// is an assumption, and their limit never binds below the SM's block limit.
    pub fn limited_by(&self) -> Option<String> {
        if self.active_warps_per_sm >= self.max_warps_per_sm && self.active_blocks_per_sm > 0 {
            return None;
        }
        Some(
            self.limiters
                .iter()
                .filter(|&&l| l != Limiter::Barriers)
                .map(|l| l.name())
                .collect::<Vec<_>>()
                .join(", "),
        )
    }
}

/// Launch statistics and theoretical occupancy of one launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Occupancy {
    /// Threads per block.
    pub block_size: u64,
    /// Blocks in the grid.
    pub grid_size: u64,
    /// `grid_size × block_size`.
    pub threads: u64,
    pub registers_per_thread: u32,
    /// Bytes per block.
    pub static_shared_memory: u32,
    /// Bytes per block.
    pub dynamic_shared_memory: u32,
    /// Shared memory the driver reserves per block, bytes (0 when unknown).
    pub driver_shared_memory: u32,
    pub theoretical: Result<Theoretical, OccupancyError>,
}

/// Launch statistics and theoretical occupancy of `kernel` on `device`, with the
/// driver's default shared-memory carveout.
pub fn occupancy(kernel: &KernelLaunch, device: &DeviceInfo) -> Occupancy {
    occupancy_with(kernel, device, Carveout::Default)
}

/// [`occupancy`] with a chosen shared-memory carveout.
pub fn occupancy_with(kernel: &KernelLaunch, device: &DeviceInfo, carveout: Carveout) -> Occupancy {
    let block_size = kernel.block_size();
    let grid_size = kernel.grid_size();
    let theoretical = DeviceProps::from_info(device).and_then(|props| {
        let block = i64::try_from(block_size).unwrap_or(i64::MAX);
        let blocks = max_active_blocks(
            &props,
            &Function {
                registers: i64::from(kernel.registers_per_thread),
                static_shared_memory: u64::from(kernel.static_shared_memory),
            },
            carveout,
            block,
            u64::from(kernel.dynamic_shared_memory),
        )?;
        let warps_per_block = div_ceil(block, props.warp_size) as u32;
        let max_warps_per_sm = (props.max_threads_per_sm / props.warp_size) as u32;
        let active = blocks.active;
        let active_warps_per_sm = active.saturating_mul(warps_per_block);
        let per_wave = u128::from(active) * props.sms as u128;
        Ok(Theoretical {
            shared_memory_configuration: blocks.shared_memory_configuration,
            allocated_registers_per_block: blocks.allocated_registers,
            allocated_shared_memory_per_block: blocks.allocated_shared_memory,
            block_limit_registers: unlimited(blocks.limit_registers),
            block_limit_shared_memory: unlimited(blocks.limit_shared_memory),
            block_limit_warps: blocks.limit_warps as u32,
            block_limit_sm: blocks.limit_blocks as u32,
            block_limit_barriers: unlimited(blocks.limit_barriers),
            active_blocks_per_sm: active,
            warps_per_block,
            active_warps_per_sm,
            max_warps_per_sm,
            occupancy_percent: hundredths(
                u128::from(active_warps_per_sm) * 100,
                u128::from(max_warps_per_sm),
            ),
            waves_per_sm: (per_wave > 0).then(|| hundredths(u128::from(grid_size), per_wave)),
            limiters: blocks.limiters,
        })
    });
    Occupancy {
        block_size,
        grid_size,
        threads: grid_size.saturating_mul(block_size),
        registers_per_thread: kernel.registers_per_thread,
        static_shared_memory: kernel.static_shared_memory,
        dynamic_shared_memory: kernel.dynamic_shared_memory,
        driver_shared_memory: device
            .attribute(attr::RESERVED_SHARED_MEMORY_PER_BLOCK)
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(0),
        theoretical,
    }
}

/// `num / den` in hundredths, rounded half to even as Nsight Compute prints
/// (15.625 → 15.62) (`den` > 0).
fn hundredths(num: u128, den: u128) -> Hundredths {
    let (q, r) = ((num * 100) / den, (num * 100) % den);
    let h = if 2 * r > den || (2 * r == den && q % 2 == 1) {
        q + 1
    } else {
        q
    };
    Hundredths(u64::try_from(h).unwrap_or(u64::MAX))
}

/// The calculator's "no limit" (`INT_MAX`).
const NO_LIMIT: i64 = i32::MAX as i64;

fn unlimited(limit: i64) -> Option<u32> {
    (limit < NO_LIMIT).then_some(limit as u32)
}

/// `x / y` rounded up, for `x` >= 0 and `y` > 0 (without overflowing near `i64::MAX`).
fn div_ceil(x: i64, y: i64) -> i64 {
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
struct Function {
    registers: i64,
    static_shared_memory: u64,
}

/// The calculator's answer for one launch.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Blocks {
    active: u32,
    limit_registers: i64,
    limit_shared_memory: i64,
    limit_warps: i64,
    limit_blocks: i64,
    limit_barriers: i64,
    limiters: Vec<Limiter>,
    allocated_registers: u64,
    allocated_shared_memory: u64,
    shared_memory_configuration: u64,
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
fn max_active_blocks(
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

/// One row of the report's "Launch statistics and occupancy" section: a kernel
/// launched with one configuration on one device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OccupancyRow {
    /// The kernel's display name (demangled).
    pub name: String,
    /// Device ordinal.
    pub device: u32,
    pub device_name: String,
    /// Launches with this configuration (over every trace).
    pub launches: u64,
    pub launch: KernelLaunch,
    pub occupancy: Occupancy,
}

/// The rows of [`occupancy_rows`], and what was left out.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OccupancyRows {
    pub rows: Vec<OccupancyRow>,
    /// Configurations beyond the row limit.
    pub more: usize,
    /// Kernel launches on a device that no DeviceInfo describes.
    pub undescribed_launches: u64,
}

/// Rows shown by default.
pub const OCCUPANCY_ROWS: usize = 20;

/// One row per kernel name, device and distinct launch configuration over all
/// `traces` (at most `limit`): kernels in order of total GPU time (descending,
/// ties by name), each kernel's configurations by launch count (descending),
/// then configuration. Launches on devices without a DeviceInfo are counted,
/// not shown. Empty when no trace has both kernels and device descriptions.
pub fn occupancy_rows(traces: &[Trace], limit: usize) -> OccupancyRows {
    type Key = (String, u32, String, KernelLaunch);
    struct Acc {
        launches: u64,
        occupancy: Occupancy,
    }
    let mut configs: HashMap<Key, Acc> = HashMap::new();
    let mut kernel_time: HashMap<String, u128> = HashMap::new();
    let mut undescribed = 0u64;
    for trace in traces {
        if trace.devices.is_empty() {
            undescribed += trace.kernels.len() as u64;
            continue;
        }
        let mut names: HashMap<u32, String> = HashMap::new();
        for k in &trace.kernels {
            let Some(device) = trace.devices.get(&k.device) else {
                undescribed += 1;
                continue;
            };
            let name = names
                .entry(k.name)
                .or_insert_with(|| trace.kernel_display_name(k.name))
                .clone();
            *kernel_time.entry(name.clone()).or_default() +=
                u128::from(k.end_ns.saturating_sub(k.start_ns));
            let launch = KernelLaunch::from(k);
            configs
                .entry((name, k.device, device.name.clone(), launch))
                .or_insert_with(|| Acc {
                    launches: 0,
                    occupancy: occupancy(&launch, device),
                })
                .launches += 1;
        }
    }
    let mut rows: Vec<OccupancyRow> = configs
        .into_iter()
        .map(|((name, device, device_name, launch), acc)| OccupancyRow {
            name,
            device,
            device_name,
            launches: acc.launches,
            launch,
            occupancy: acc.occupancy,
        })
        .collect();
    rows.sort_by(|a, b| {
        let time = |r: &OccupancyRow| kernel_time.get(&r.name).copied().unwrap_or(0);
        time(b)
            .cmp(&time(a))
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| b.launches.cmp(&a.launches))
            .then_with(|| a.device.cmp(&b.device))
            .then_with(|| a.launch.cmp(&b.launch))
    });
    let more = rows.len().saturating_sub(limit);
    rows.truncate(limit);
    OccupancyRows {
        rows,
        more,
        undescribed_launches: undescribed,
    }
}

#[cfg(test)]
mod tests;
