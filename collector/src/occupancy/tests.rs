//! The calculator against the CUDA occupancy calculator's own answers
//! (`collector/tests/data/occupancy_table.csv`, made by `tools/occupancy-table.sh`
//! from `cuda_occupancy.h`), worked examples, and the per-kernel rows.

use super::*;
use std::collections::BTreeMap;
use std::io::BufRead;

const TABLE: &str = include_str!("../../tests/data/occupancy_table.csv");

/// A DeviceInfo with the calculator's device properties.
fn device(f: &[&str]) -> DeviceInfo {
    let n = |i: usize| f[i].parse::<i32>().unwrap();
    DeviceInfo {
        ordinal: 0,
        name: f[1].to_string(),
        total_memory: 0,
        attributes: vec![
            (attr::COMPUTE_CAPABILITY_MAJOR, n(2)),
            (attr::COMPUTE_CAPABILITY_MINOR, n(3)),
            (attr::MULTIPROCESSOR_COUNT, n(4)),
            (attr::MAX_THREADS_PER_BLOCK, n(5)),
            (attr::MAX_THREADS_PER_MULTIPROCESSOR, n(6)),
            (attr::MAX_REGISTERS_PER_BLOCK, n(7)),
            (attr::MAX_REGISTERS_PER_MULTIPROCESSOR, n(8)),
            (attr::WARP_SIZE, n(9)),
            (attr::MAX_SHARED_MEMORY_PER_BLOCK, n(10)),
            (attr::MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, n(11)),
            (attr::MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, n(12)),
            (attr::RESERVED_SHARED_MEMORY_PER_BLOCK, n(13)),
        ],
    }
}

/// An H100 SXM (and H200) as the driver describes it.
fn h100() -> DeviceInfo {
    device(&[
        "device", "H100", "9", "0", "132", "1024", "2048", "65536", "65536", "32", "49152",
        "233472", "232448", "1024",
    ])
}

/// The header's answer, as the table writes it:
/// `status active limit_regs limit_smem limit_warps limit_blocks limit_barriers factors
/// alloc_regs alloc_smem` (status 0 success, 1 invalid input, 2 unknown device).
fn answer(props: &DeviceProps, launch: &[i64], carveout: i32) -> Vec<i64> {
    let [block, regs, static_smem, dynamic] = launch.try_into().unwrap();
    let carveout = match carveout {
        -1 => Carveout::Default,
        pc => Carveout::Percent(pc),
    };
    let f = Function {
        registers: regs,
        static_shared_memory: static_smem as u64,
    };
    match max_active_blocks(props, &f, carveout, block, dynamic as u64) {
        Ok(b) => vec![
            0,
            i64::from(b.active),
            b.limit_registers,
            b.limit_shared_memory,
            b.limit_warps,
            b.limit_blocks,
            b.limit_barriers,
            i64::from(b.limiters.iter().map(|l| l.bit()).sum::<u32>()),
            b.allocated_registers as i64,
            b.allocated_shared_memory as i64,
        ],
        Err(OccupancyError::InvalidInput(_)) => vec![1, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        Err(OccupancyError::UnknownDevice(..)) => vec![2, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        Err(e) => panic!("{e}"),
    }
}

/// Checks every `occ` row of a table in the fixture's format; returns the row count
/// per status.
fn check_table(table: &str) -> [u64; 3] {
    let mut devices: BTreeMap<String, DeviceProps> = BTreeMap::new();
    let mut seen_status = [0; 3];
    for line in table.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split(',').collect();
        match f[0] {
            "device" => {
                let props = DeviceProps::from_info(&device(&f)).unwrap();
                devices.insert(f[1].to_string(), props);
            }
            "occ" => {
                let n: Vec<i64> = f[2..].iter().map(|v| v.parse().unwrap()).collect();
                let props = &devices[f[1]];
                let got = answer(props, &n[0..4], n[4] as i32);
                assert_eq!(got, n[5..], "{line}");
                seen_status[n[5] as usize] += 1;
            }
            other => panic!("unexpected line kind {other}"),
        }
    }
    assert!(devices.len() >= 10);
    seen_status
}

#[test]
fn matches_the_cuda_occupancy_calculator() {
    let seen = check_table(TABLE);
    assert!(seen.iter().sum::<u64>() > 400, "{seen:?}");
    assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
}

/// A larger sample of `tools/occupancy-table.sh --sample N FILE`:
/// `RTRACE_OCCUPANCY_SAMPLE=FILE cargo test --release -p rtrace-collector occupancy -- --ignored`.
#[test]
#[ignore = "needs RTRACE_OCCUPANCY_SAMPLE, a table from tools/occupancy-table.sh --sample"]
fn matches_the_cuda_occupancy_calculator_on_a_large_sample() {
    let path = std::env::var_os("RTRACE_OCCUPANCY_SAMPLE").expect("RTRACE_OCCUPANCY_SAMPLE");
    let seen = check_table(&std::fs::read_to_string(path).unwrap());
    eprintln!("launches by status (ok, invalid, unknown device): {seen:?}");
}

/// The full H100 grid of `tools/occupancy-table.sh --full FILE` (~18.7M launches):
/// `RTRACE_OCCUPANCY_FULL=FILE cargo test --release -p rtrace-collector occupancy -- --ignored`.
#[test]
#[ignore = "needs RTRACE_OCCUPANCY_FULL, a table from tools/occupancy-table.sh --full"]
fn matches_the_cuda_occupancy_calculator_on_the_full_h100_grid() {
    let path = std::env::var_os("RTRACE_OCCUPANCY_FULL").expect("RTRACE_OCCUPANCY_FULL");
    let props = DeviceProps::from_info(&h100()).unwrap();
    let file = std::io::BufReader::new(std::fs::File::open(path).unwrap());
    let mut rows = 0u64;
    for line in file.lines() {
        let line = line.unwrap();
        // block regs dynamic active limit_regs limit_smem limit_warps factors
        let n: Vec<i64> = line.split(' ').map(|v| v.parse().unwrap()).collect();
        let a = answer(&props, &[n[0], n[1], 0, n[2]], -1);
        assert_eq!(a[0], 0, "{line}");
        assert_eq!([a[1], a[2], a[3], a[4], a[7]], n[3..8], "{line}");
        rows += 1;
    }
    assert_eq!(rows, 32 * 240 * (233_472 / 96 + 1));
}

fn launch(block: i32, grid: i32, regs: u32, static_smem: u32, dynamic: u32) -> KernelLaunch {
    KernelLaunch {
        grid: [grid, 1, 1],
        block: [block, 1, 1],
        registers_per_thread: regs,
        static_shared_memory: static_smem,
        dynamic_shared_memory: dynamic,
    }
}

#[test]
fn h100_worked_examples() {
    let h = h100();
    // 256 threads, 16 registers, no shared memory: 8 blocks of 8 warps fill the SM.
    let o = occupancy(&launch(256, 4096, 16, 0, 0), &h);
    assert_eq!(
        (o.block_size, o.grid_size, o.threads),
        (256, 4096, 1_048_576)
    );
    assert_eq!(o.driver_shared_memory, 1024);
    let t = o.theoretical.unwrap();
    assert_eq!(t.block_limit_registers, Some(16));
    // 1 KiB reserved per block: 228 KiB / 1 KiB.
    assert_eq!(t.block_limit_shared_memory, Some(228));
    assert_eq!(t.block_limit_warps, 8);
    assert_eq!(t.block_limit_sm, 32);
    assert_eq!(t.block_limit_barriers, Some(64));
    assert_eq!(t.active_blocks_per_sm, 8);
    assert_eq!((t.active_warps_per_sm, t.max_warps_per_sm), (64, 64));
    assert_eq!(t.occupancy_percent.to_string(), "100.00");
    // 4096 / (8 × 132) = 3.878…
    assert_eq!(t.waves_per_sm.unwrap().to_string(), "3.88");
    assert_eq!(t.limiters, vec![Limiter::Warps]);
    assert_eq!(t.limited_by(), None);
    assert_eq!(t.shared_memory_configuration, 228 * 1024);
    assert_eq!(t.allocated_registers_per_block, 16 * 32 * 8);
    assert_eq!(t.allocated_shared_memory_per_block, 1024);

    // 128 registers per thread: 4096 per warp, 4 warps per sub-partition → 16 warps:
    // 2 blocks of 8 warps, 25 %.
    let t = occupancy(&launch(256, 264, 128, 0, 0), &h)
        .theoretical
        .unwrap();
    assert_eq!(t.block_limit_registers, Some(2));
    assert_eq!(t.active_blocks_per_sm, 2);
    assert_eq!(t.occupancy_percent.to_string(), "25.00");
    assert_eq!(t.waves_per_sm.unwrap().to_string(), "1.00");
    assert_eq!(t.limited_by().as_deref(), Some("registers"));

    // 100 KiB dynamic shared memory (+1 KiB reserved): 2 blocks in 228 KiB.
    let t = occupancy(&launch(128, 132, 32, 0, 100 * 1024), &h)
        .theoretical
        .unwrap();
    assert_eq!(t.allocated_shared_memory_per_block, 101 * 1024);
    assert_eq!(t.block_limit_shared_memory, Some(2));
    assert_eq!(t.active_warps_per_sm, 8);
    assert_eq!(t.occupancy_percent.to_string(), "12.50");
    assert_eq!(t.waves_per_sm.unwrap().to_string(), "0.50");
    assert_eq!(t.limited_by().as_deref(), Some("shared memory"));

    // 64 threads, few registers: the SM's 32-block limit (and the barriers) bind.
    let t = occupancy(&launch(64, 1, 16, 0, 0), &h).theoretical.unwrap();
    assert_eq!(t.active_blocks_per_sm, 32);
    assert_eq!(t.limiters, vec![Limiter::Warps, Limiter::Blocks]);
    assert_eq!(t.waves_per_sm.unwrap().to_string(), "0.00");

    // More shared memory than a block may have: cannot run.
    let t = occupancy(&launch(128, 1, 32, 0, 232_449), &h)
        .theoretical
        .unwrap();
    assert_eq!(t.active_blocks_per_sm, 0);
    assert_eq!(t.block_limit_shared_memory, Some(0));
    assert_eq!(t.waves_per_sm, None);
    assert_eq!(t.occupancy_percent.to_string(), "0.00");
    assert_eq!(t.limited_by().as_deref(), Some("shared memory"));

    // 40 KiB static (+1 KiB): 5 blocks of 2 warps = 15.625 %, shown as Nsight Compute does.
    let t = occupancy(&launch(64, 2000, 22, 40 * 1024, 0), &h)
        .theoretical
        .unwrap();
    assert_eq!(t.block_limit_shared_memory, Some(5));
    assert_eq!(t.block_limit_registers, Some(42));
    assert_eq!(t.occupancy_percent.to_string(), "15.62");
    assert_eq!(t.waves_per_sm.unwrap().to_string(), "3.03");
    assert_eq!(hundredths(3, 8).to_string(), "0.38");
    assert_eq!(hundredths(1, 8).to_string(), "0.12");

    // A smaller carveout: 50 % of 228 KiB → 114 KiB → 132 KiB offered.
    let o = occupancy_with(&launch(128, 1, 32, 0, 30 * 1024), &h, Carveout::Percent(50));
    let t = o.theoretical.unwrap();
    assert_eq!(t.shared_memory_configuration, 132 * 1024);
    assert_eq!(t.block_limit_shared_memory, Some(4));
}

#[test]
fn what_cannot_be_computed_says_why() {
    let mut d = h100();
    let o = occupancy(&launch(0, 1, 16, 0, 0), &d);
    assert!(matches!(
        o.theoretical,
        Err(OccupancyError::InvalidInput(_))
    ));
    d.attributes
        .retain(|&(a, _)| a != attr::MAX_REGISTERS_PER_MULTIPROCESSOR);
    let e = occupancy(&launch(32, 1, 16, 0, 0), &d)
        .theoretical
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "the device description lacks MAX_REGISTERS_PER_MULTIPROCESSOR"
    );
    let mut d = h100();
    d.attributes.push((attr::COMPUTE_CAPABILITY_MAJOR, 42));
    let e = occupancy(&launch(32, 1, 16, 0, 0), &d)
        .theoretical
        .unwrap_err();
    assert_eq!(e.to_string(), "compute capability 42.0 is not known");
    let mut d = h100();
    d.attributes.push((attr::WARP_SIZE, 0));
    let e = occupancy(&launch(32, 1, 16, 0, 0), &d)
        .theoretical
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid input: the device's WARP_SIZE is not positive"
    );
}

/// The simulated driver's device: no driver reservation.
#[test]
fn simulated_device_without_reserved_shared_memory() {
    let mut d = h100();
    d.attributes
        .push((attr::RESERVED_SHARED_MEMORY_PER_BLOCK, 0));
    let o = occupancy(&launch(256, 1, 32, 0, 0), &d);
    assert_eq!(o.driver_shared_memory, 0);
    let t = o.theoretical.unwrap();
    assert_eq!(t.block_limit_shared_memory, None);
    assert_eq!(t.active_blocks_per_sm, 8);
}

fn record(name: u32, device: u32, span: (u64, u64), l: KernelLaunch) -> KernelRecord {
    KernelRecord {
        start_ns: span.0,
        end_ns: span.1,
        name,
        device,
        grid: l.grid,
        block: l.block,
        registers_per_thread: l.registers_per_thread,
        static_shared_memory: l.static_shared_memory,
        dynamic_shared_memory: l.dynamic_shared_memory,
        ..Default::default()
    }
}

#[test]
fn rows_per_kernel_device_and_configuration() {
    let small = launch(256, 4096, 16, 0, 0);
    let big = launch(1024, 132, 64, 0, 0);
    let t = Trace {
        kernel_names: [(0, "_Z4stepv".to_string()), (1, "copy".to_string())].into(),
        kernels: vec![
            record(0, 0, (0, 100), small),
            record(0, 0, (100, 200), big),
            record(0, 0, (200, 300), big),
            record(1, 0, (300, 700), small),
            // No DeviceInfo for device 3.
            record(1, 3, (700, 800), small),
        ],
        devices: [(0, h100())].into(),
        ..Default::default()
    };
    let r = occupancy_rows(std::slice::from_ref(&t), OCCUPANCY_ROWS);
    assert_eq!(r.undescribed_launches, 1);
    assert_eq!(r.more, 0);
    let got: Vec<(&str, u64, i32)> = r
        .rows
        .iter()
        .map(|r| (r.name.as_str(), r.launches, r.launch.block[0]))
        .collect();
    // copy: 400 ns in all; step(): 300 ns; step()'s most frequent configuration first.
    assert_eq!(
        got,
        [("copy", 1, 256), ("step()", 2, 1024), ("step()", 1, 256)]
    );
    assert_eq!(r.rows[1].device_name, "H100");
    let t2 = r.rows[1].occupancy.theoretical.as_ref().unwrap();
    // 1024 threads × 64 registers: one block of 32 warps.
    assert_eq!(t2.active_blocks_per_sm, 1);
    assert_eq!(t2.occupancy_percent.to_string(), "50.00");

    let r = occupancy_rows(std::slice::from_ref(&t), 2);
    assert_eq!((r.rows.len(), r.more), (2, 1));

    let no_devices = Trace {
        devices: Default::default(),
        ..t
    };
    let r = occupancy_rows(&[no_devices], OCCUPANCY_ROWS);
    assert!(r.rows.is_empty());
    assert_eq!(r.undescribed_launches, 5);
}

/// A trace on an H100 with three kernels, one of them in two configurations.
fn sample_trace() -> Trace {
    let mut h = h100();
    h.name = "NVIDIA H100 80GB HBM3".into();
    h.attributes.push((attr::MAX_BLOCKS_PER_MULTIPROCESSOR, 32));
    Trace {
        kernel_names: [
            (0, "_Z4stepPfi".to_string()),
            (1, "gemm".to_string()),
            (2, "tiny".to_string()),
        ]
        .into(),
        kernels: vec![
            record(0, 0, (0, 1_000), launch(256, 4096, 16, 0, 0)),
            record(0, 0, (1_000, 2_000), launch(256, 4096, 16, 0, 0)),
            record(0, 0, (2_000, 2_500), launch(1024, 132, 64, 0, 0)),
            record(
                1,
                0,
                (3_000, 9_000),
                launch(128, 264, 168, 16_384, 100 * 1024),
            ),
            record(2, 0, (9_000, 9_100), launch(32, 1, 16, 0, 300 * 1024)),
        ],
        devices: [(0, h)].into(),
        ..Default::default()
    }
}

#[test]
fn table_section() {
    let out = crate::render_report(&[sample_trace()], crate::Format::Table);
    let at = out
        .find("Launch statistics and occupancy")
        .unwrap_or_else(|| panic!("{out}"));
    let expected = "\
Launch statistics and occupancy: 4 launch configurations of 3 kernels
  device 0: NVIDIA H100 80GB HBM3, compute capability 9.0, 132 SMs
    per SM: 2048 threads, 32 blocks, 65536 registers, 228 KiB shared memory
  shared memory per block, bytes: static, dynamic, driver (reserved); waves/SM: grid / (active blocks per SM x SMs)
kernel             device  launches       block        grid  threads  regs  static  dynamic  driver  waves/SM
gemm                    0         1   (128,1,1)   (264,1,1)    33792   168   16384   102400    1024      2.00
step(float*, int)       0         2   (256,1,1)  (4096,1,1)  1048576    16       0        0    1024      3.88
step(float*, int)       0         1  (1024,1,1)   (132,1,1)   135168    64       0        0    1024      1.00
tiny                    0         1    (32,1,1)     (1,1,1)       32    16       0   307200    1024         -
  theoretical occupancy, default shared-memory carveout; block limits in blocks per SM: regs, smem, warps, SM (block slots)
kernel             device  regs  smem  warps  SM  warps/SM  occupancy  limited by
gemm                    0     3     1     16  32      4/64      6.25%  shared memory
step(float*, int)       0    16   228      8  32     64/64    100.00%  -
step(float*, int)       0     1   228      2  32     32/64     50.00%  registers
tiny                    0   128     0     64  32      0/64      0.00%  cannot run: shared memory
";
    assert_eq!(&out[at..], expected);
    assert!(out[..at].ends_with("\n\n"), "{out}");
}

#[test]
fn table_section_needs_devices_and_kernels() {
    let no_devices = Trace {
        devices: Default::default(),
        ..sample_trace()
    };
    let out = crate::render_report(&[no_devices], crate::Format::Table);
    assert!(out.contains("GPU kernel summary"), "{out}");
    assert!(!out.contains("Launch statistics"), "{out}");
    // Kernels on a device without a description only.
    let mut t = sample_trace();
    for k in &mut t.kernels {
        k.device = 1;
    }
    let out = crate::render_report(&[t], crate::Format::Table);
    assert!(
        out.ends_with(
            "Launch statistics and occupancy: 0 launch configurations of 0 kernels\n  \
             no kernel ran on a described device (5 launches on devices without a description)\n"
        ),
        "{out}"
    );
}

#[test]
fn table_section_lists_at_most_20_configurations() {
    let mut t = sample_trace();
    t.kernels = (0..25)
        .map(|i| record(0, 0, (0, 10), launch(32 * (i + 1), 1, 16, 0, 0)))
        .collect();
    let out = crate::render_report(&[t], crate::Format::Table);
    assert!(
        out.contains("Launch statistics and occupancy: 25 launch configurations of 1 kernel\n"),
        "{out}"
    );
    let section = &out[out.find("Launch statistics").unwrap()..];
    assert_eq!(section.matches("\nstep(float*, int) ").count(), 40, "{out}");
    assert!(
        out.ends_with("  … and 5 more configurations (--format json lists them)\n"),
        "{out}"
    );
    let json = crate::render_report(&[sample_trace()], crate::Format::Json);
    assert!(json.contains("\"occupancy\":[\n"), "{json}");
}

#[test]
fn json_key() {
    let out = crate::render_report(&[sample_trace()], crate::Format::Json);
    let at = out.find("\"occupancy\"").unwrap_or_else(|| panic!("{out}"));
    let lines: Vec<&str> = out[at..].lines().collect();
    assert_eq!(lines.len(), 8, "{out}");
    assert_eq!(lines[0], "\"occupancy\":[");
    assert_eq!(lines[5], "],");
    assert_eq!(lines[6], "\"nvtx\":{\"ranges\":[],\"open\":0,\"marks\":0},");
    assert_eq!(lines[7], "\"external\":[]}");
    assert_eq!(
        lines[2],
        concat!(
            "  {\"name\":\"step(float*, int)\",\"device\":0,",
            "\"device_name\":\"NVIDIA H100 80GB HBM3\",\"launches\":2,\"grid\":[4096,1,1],",
            "\"block\":[256,1,1],\"block_size\":256,\"grid_size\":4096,\"threads\":1048576,",
            "\"registers_per_thread\":16,\"static_shared_memory\":0,",
            "\"dynamic_shared_memory\":0,\"driver_shared_memory\":1024,",
            "\"shared_memory_configuration\":233472,\"allocated_registers_per_block\":4096,",
            "\"allocated_shared_memory_per_block\":1024,\"block_limit_registers\":16,",
            "\"block_limit_shared_memory\":228,\"block_limit_warps\":8,\"block_limit_sm\":32,",
            "\"block_limit_barriers\":64,\"active_blocks_per_sm\":8,\"warps_per_block\":8,",
            "\"active_warps_per_sm\":64,\"max_warps_per_sm\":64,\"occupancy_percent\":100.00,",
            "\"waves_per_sm\":3.88,\"limiters\":[\"warps\"],\"error\":null},"
        )
    );
    assert!(lines[4].contains("\"waves_per_sm\":null,"), "{}", lines[4]);

    // A device the calculator does not know: the launch statistics, nulls and the error.
    let mut t = sample_trace();
    let d = t.devices.get_mut(&0).unwrap();
    d.attributes.push((attr::COMPUTE_CAPABILITY_MAJOR, 42));
    let out = crate::render_report(&[t], crate::Format::Json);
    assert!(
        out.contains(
            "\"driver_shared_memory\":1024,\"shared_memory_configuration\":null,\
             \"allocated_registers_per_block\":null,"
        ),
        "{out}"
    );
    assert!(
        out.contains(
            "\"waves_per_sm\":null,\"limiters\":null,\
             \"error\":\"compute capability 42.0 is not known\"}"
        ),
        "{out}"
    );
    let table = crate::render_report(&[sample_trace_on_cc(42)], crate::Format::Table);
    assert!(
        table.contains("     -  compute capability 42.0 is not known\n"),
        "{table}"
    );
}

fn sample_trace_on_cc(major: i32) -> Trace {
    let mut t = sample_trace();
    t.devices
        .get_mut(&0)
        .unwrap()
        .attributes
        .push((attr::COMPUTE_CAPABILITY_MAJOR, major));
    t
}
