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
use calculator::{div_ceil, max_active_blocks, Function, NO_LIMIT};
use rtrace_format::{attr, DeviceInfo, KernelRecord};
use std::collections::HashMap;

mod calculator;

pub use calculator::{Carveout, DeviceProps, Limiter, OccupancyError};

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

/// `limit`, or `None` where it is the calculator's "no limit".
fn unlimited(limit: i64) -> Option<u32> {
    (limit < NO_LIMIT).then_some(limit as u32)
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
    let rows: Vec<OccupancyRow> = configs
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
    let time = |name: &str| kernel_time.get(name).copied().unwrap_or(0);
    ranked(rows, time, limit, undescribed)
}

/// The rows to show: the kernels with the most GPU time first (`time` of a kernel's name),
/// then by name, launches (most first), device and launch configuration; `limit` of them, the
/// rest counted.
pub fn ranked(
    mut rows: Vec<OccupancyRow>,
    time: impl Fn(&str) -> u128,
    limit: usize,
    undescribed: u64,
) -> OccupancyRows {
    rows.sort_by(|a, b| {
        time(&b.name)
            .cmp(&time(&a.name))
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
