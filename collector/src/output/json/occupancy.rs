//! The `occupancy` key of `--format json` ([`crate::occupancy`]): one object per
//! kernel, device and launch configuration (every one, not only the first 20).

use super::syntax::{array, opt};
use crate::occupancy::OccupancyRow;
use crate::report::Sections;
use crate::text::json_string;
use std::fmt::Write;

/// Writes `,\n"occupancy":[...]`; an empty array when no trace has both kernel
/// records and a DeviceInfo.
pub(super) fn key(out: &mut String, s: &Sections) {
    array(out, "occupancy", &s.occupancy.rows, row);
}

fn row(out: &mut String, r: &OccupancyRow) {
    let o = &r.occupancy;
    let l = &r.launch;
    let _ = write!(
        out,
        "{{\"name\":{},\"device\":{},\"device_name\":{},\"launches\":{},\
         \"grid\":[{},{},{}],\"block\":[{},{},{}],\"block_size\":{},\"grid_size\":{},\
         \"threads\":{},\"registers_per_thread\":{},\"static_shared_memory\":{},\
         \"dynamic_shared_memory\":{},\"driver_shared_memory\":{},",
        json_string(&r.name),
        r.device,
        json_string(&r.device_name),
        r.launches,
        l.grid[0],
        l.grid[1],
        l.grid[2],
        l.block[0],
        l.block[1],
        l.block[2],
        o.block_size,
        o.grid_size,
        o.threads,
        o.registers_per_thread,
        o.static_shared_memory,
        o.dynamic_shared_memory,
        o.driver_shared_memory,
    );
    let t = o.theoretical.as_ref().ok();
    let field =
        |f: &dyn Fn(&crate::occupancy::Theoretical) -> String| t.map_or("null".to_string(), f);
    let _ = write!(
        out,
        "\"shared_memory_configuration\":{},\"allocated_registers_per_block\":{},\
         \"allocated_shared_memory_per_block\":{},\"block_limit_registers\":{},\
         \"block_limit_shared_memory\":{},\"block_limit_warps\":{},\"block_limit_sm\":{},\
         \"block_limit_barriers\":{},\"active_blocks_per_sm\":{},\"warps_per_block\":{},\
         \"active_warps_per_sm\":{},\"max_warps_per_sm\":{},\"occupancy_percent\":{},\
         \"waves_per_sm\":{},\"limiters\":{},\"error\":{}}}",
        field(&|t| t.shared_memory_configuration.to_string()),
        field(&|t| t.allocated_registers_per_block.to_string()),
        field(&|t| t.allocated_shared_memory_per_block.to_string()),
        field(&|t| opt(t.block_limit_registers)),
        field(&|t| opt(t.block_limit_shared_memory)),
        field(&|t| t.block_limit_warps.to_string()),
        field(&|t| t.block_limit_sm.to_string()),
        field(&|t| opt(t.block_limit_barriers)),
        field(&|t| t.active_blocks_per_sm.to_string()),
        field(&|t| t.warps_per_block.to_string()),
        field(&|t| t.active_warps_per_sm.to_string()),
        field(&|t| t.max_warps_per_sm.to_string()),
        field(&|t| t.occupancy_percent.to_string()),
        field(&|t| opt(t.waves_per_sm)),
        field(&|t| {
            let names: Vec<String> = t.limiters.iter().map(|l| json_string(l.name())).collect();
            format!("[{}]", names.join(","))
        }),
        o.theoretical
            .as_ref()
            .err()
            .map_or("null".to_string(), |e| json_string(&e.to_string())),
    );
}
