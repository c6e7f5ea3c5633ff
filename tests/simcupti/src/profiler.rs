//! The simulated profiler's rules, free of FFI: the chips it knows, which metric names it
//! accepts, how many passes a configuration costs, the value of a metric for a range, and the
//! byte layout of its images (counter availability, configuration, counter data). The exported
//! host, target and range-profiler functions (`profiler_host`, `range_profiler`) use these;
//! README.md ("Kernel profiling") states every rule, and tests check them.

/// The chips `cuptiProfilerHostGetSupportedChips` lists (CUPTI 13.0's list, in its order).
pub const CHIPS: [&str; 30] = [
    "GV100", "GV11B", "TU102", "TU104", "TU106", "TU116", "TU117", "GA100", "GA102", "GA103",
    "GA104", "GA106", "GA107", "GA10B", "GH100", "AD102", "AD103", "AD104", "AD106", "AD107",
    "GB100", "GB102", "GB110", "GB10B", "GB202", "GB203", "GB205", "GB206", "GB207", "GB20B",
];

/// The chip of every simcuda device (an H100 SXM: compute capability 9.0).
pub const DEVICE_CHIP: &str = "GH100";

/// The SM clock the cycle metrics are derived at: simcuda's `CLOCK_RATE`, 1 980 000 kHz.
pub const CLOCK_KHZ: u64 = 1_980_000;

/// Metric names whose first `.`-separated part after the base may follow the base.
pub const ROLLUPS: [&str; 6] = ["sum", "avg", "min", "max", "pct", "ratio"];

/// The base metrics `cuptiProfilerHostGetBaseMetrics` lists for each metric type
/// (counter, ratio, throughput).
pub const BASE_COUNTERS: [&str; 6] = [
    "dram__bytes",
    "gpc__cycles_elapsed",
    "gpu__time_duration",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld",
    "sm__cycles_active",
    "smsp__inst_executed",
];
pub const BASE_RATIOS: [&str; 2] = ["l1tex__t_sector_hit_rate", "lts__t_sector_hit_rate"];
pub const BASE_THROUGHPUTS: [&str; 3] =
    ["gpu__dram_throughput", "lts__throughput", "sm__throughput"];

/// Whether simcupti accepts a metric name: one of `rtrace_format::metric_sets::SETS`, or of the
/// shape `<base>.<rollup>[.<submetric>]`, `base` of `[a-z0-9_]` holding `__`, `rollup` one of
/// [`ROLLUPS`], `submetric` non-empty `[a-z0-9_.]` not starting or ending with `.`.
pub fn metric_valid(name: &str) -> bool {
    if rtrace_format::metric_sets::SETS
        .iter()
        .any(|s| s.metrics.iter().any(|m| m.name == name))
    {
        return true;
    }
    let word = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    };
    let mut parts = name.splitn(3, '.');
    let (Some(base), Some(rollup)) = (parts.next(), parts.next()) else {
        return false;
    };
    let sub_ok = match parts.next() {
        None => true,
        Some(sub) => sub.split('.').all(word),
    };
    word(base) && base.contains("__") && ROLLUPS.contains(&rollup) && sub_ok
}

/// The passes a configuration of `n` distinct metrics costs: `1 + (n - 1) / 4` (integer
/// division), 0 for none.
pub fn passes(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        1 + (n - 1) / 4
    }
}

/// FNV-1a, 64 bits, of `metric`, one 0 byte, and `subject`.
pub fn hash(metric: &str, subject: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in metric.as_bytes().iter().chain(&[0u8]).chain(subject) {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// Elapsed cycles of a range of `duration_ns`: `duration_ns * CLOCK_KHZ / 1_000_000`, floored.
pub fn cycles(duration_ns: u64) -> u64 {
    (duration_ns as u128 * CLOCK_KHZ as u128 / 1_000_000) as u64
}

/// A metric's value for a range: `subject` is the kernel's name (auto range) or the range's
/// name (user range), `duration_ns` the range's simulated GPU time.
pub fn value(metric: &str, subject: &[u8], duration_ns: u64) -> f64 {
    match metric {
        "gpu__time_duration.sum" => duration_ns as f64,
        "gpc__cycles_elapsed.max" => cycles(duration_ns) as f64,
        "sm__cycles_active.avg" => cycles(duration_ns) as f64 * 0.875,
        _ if metric.contains("pct") => (hash(metric, subject) % 10_000) as f64 / 100.0,
        _ => ((hash(metric, subject) >> 16) % 1_000_000) as f64,
    }
}

// ---- images

/// `cuptiProfilerGetCounterAvailability`'s image: `SIMCAVL\0`, then the chip name,
/// NUL-padded to 64 bytes in all.
pub const AVAILABILITY_SIZE: usize = 64;
pub const AVAILABILITY_MAGIC: &[u8; 8] = b"SIMCAVL\0";

pub fn availability_image(chip: &str) -> [u8; AVAILABILITY_SIZE] {
    let mut img = [0u8; AVAILABILITY_SIZE];
    img[..8].copy_from_slice(AVAILABILITY_MAGIC);
    let n = chip.len().min(AVAILABILITY_SIZE - 9);
    img[8..8 + n].copy_from_slice(&chip.as_bytes()[..n]);
    img
}

/// NUL-terminated names, back to back, padded with zeros to a multiple of 8.
fn names_block(names: &[String]) -> Vec<u8> {
    let mut b = Vec::new();
    for n in names {
        b.extend_from_slice(n.as_bytes());
        b.push(0);
    }
    b.resize(b.len().div_ceil(8) * 8, 0);
    b
}

fn read_names(block: &[u8], n: usize) -> Option<Vec<String>> {
    let names: Vec<String> = block
        .split(|&b| b == 0)
        .take(n)
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect();
    (names.len() == n).then_some(names)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().unwrap_or([0; 4]))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]))
}

/// The configuration image: `SIMCCFG\0`, u32 metric count, u32 passes, the names block.
pub const CONFIG_MAGIC: &[u8; 8] = b"SIMCCFG\0";

pub fn config_image(metrics: &[String]) -> Vec<u8> {
    let mut img = CONFIG_MAGIC.to_vec();
    img.extend_from_slice(&(metrics.len() as u32).to_ne_bytes());
    img.extend_from_slice(&(passes(metrics.len()) as u32).to_ne_bytes());
    img.extend_from_slice(&names_block(metrics));
    img
}

/// A configuration image's metrics and passes, if `img` is one.
pub fn read_config(img: &[u8]) -> Option<(Vec<String>, usize)> {
    if img.len() < 16 || &img[..8] != CONFIG_MAGIC {
        return None;
    }
    let names = read_names(&img[16..], u32_at(img, 8) as usize)?;
    Some((names, u32_at(img, 12) as usize))
}

/// The counter data image: a 32-byte header (`SIMCDAT\0`, u32 max ranges, u32 ranges filled,
/// u32 metric count, u32 names block length, 8 reserved bytes), the names block, then
/// `max ranges` slots of [`SLOT`] bytes.
pub const DATA_MAGIC: &[u8; 8] = b"SIMCDAT\0";
pub const DATA_HEADER: usize = 32;
/// A range's slot: u64 duration (ns), u32 passes, u32 launches, the range name (NUL-padded,
/// [`NAME_LEN`] bytes), the subject (kernel name; NUL-padded, [`SUBJECT_LEN`] bytes).
pub const SLOT: usize = 512;
pub const NAME_LEN: usize = 128;
pub const SUBJECT_LEN: usize = SLOT - 16 - NAME_LEN;

pub fn data_size(metrics: &[String], max_ranges: usize) -> usize {
    DATA_HEADER + names_block(metrics).len() + max_ranges * SLOT
}

/// Writes an empty counter data image into `img` (which is `data_size` long).
pub fn data_init(img: &mut [u8], metrics: &[String], max_ranges: usize) {
    img.fill(0);
    let block = names_block(metrics);
    img[..8].copy_from_slice(DATA_MAGIC);
    img[8..12].copy_from_slice(&(max_ranges as u32).to_ne_bytes());
    img[16..20].copy_from_slice(&(metrics.len() as u32).to_ne_bytes());
    img[20..24].copy_from_slice(&(block.len() as u32).to_ne_bytes());
    img[DATA_HEADER..DATA_HEADER + block.len()].copy_from_slice(&block);
}

/// The metrics a counter data image was sized for (its counters were collected), if `img` is
/// one.
pub fn data_metrics(img: &[u8]) -> Option<Vec<String>> {
    if img.len() < DATA_HEADER || &img[..8] != DATA_MAGIC {
        return None;
    }
    let len = u32_at(img, 20) as usize;
    let block = img.get(DATA_HEADER..DATA_HEADER + len)?;
    read_names(block, u32_at(img, 16) as usize)
}

/// One range as held in a counter data image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Range {
    /// Its name; nesting levels of user ranges joined by [`LEVEL_SEP`].
    pub name: Vec<u8>,
    /// The kernel's name (auto range) or the range's name (user range).
    pub subject: Vec<u8>,
    pub duration_ns: u64,
    /// Passes the range was replayed (collected) in.
    pub passes: u32,
    /// Kernel launches in the range.
    pub launches: u32,
}

/// Separates the nesting levels of a user range's name inside an image.
pub const LEVEL_SEP: u8 = 0x1f;

/// A counter data image's header: `(max ranges, ranges filled, slots offset)`, if `img` is one.
pub fn read_data(img: &[u8]) -> Option<(usize, usize, usize)> {
    if img.len() < DATA_HEADER || &img[..8] != DATA_MAGIC {
        return None;
    }
    let max = u32_at(img, 8) as usize;
    let slots = DATA_HEADER + u32_at(img, 20) as usize;
    (img.len() >= slots + max * SLOT).then_some((max, u32_at(img, 12) as usize, slots))
}

/// Appends ranges to an image while it has room; returns how many did not fit.
pub fn data_append(img: &mut [u8], ranges: &[Range]) -> usize {
    let Some((max, filled, slots)) = read_data(img) else {
        return ranges.len();
    };
    let fit = ranges.len().min(max - filled.min(max));
    for (i, r) in ranges[..fit].iter().enumerate() {
        let at = slots + (filled + i) * SLOT;
        let s = &mut img[at..at + SLOT];
        s.fill(0);
        s[..8].copy_from_slice(&r.duration_ns.to_ne_bytes());
        s[8..12].copy_from_slice(&r.passes.to_ne_bytes());
        s[12..16].copy_from_slice(&r.launches.to_ne_bytes());
        let n = r.name.len().min(NAME_LEN - 1);
        s[16..16 + n].copy_from_slice(&r.name[..n]);
        let k = r.subject.len().min(SUBJECT_LEN - 1);
        s[16 + NAME_LEN..16 + NAME_LEN + k].copy_from_slice(&r.subject[..k]);
    }
    img[12..16].copy_from_slice(&((filled + fit) as u32).to_ne_bytes());
    ranges.len() - fit
}

/// Application replay, pass `pass` (> 0): the first range of the image collected in `pass`
/// passes so far gets one more. False when no range awaits that pass.
pub fn data_add_pass(img: &mut [u8], pass: usize) -> bool {
    let Some((_, filled, slots)) = read_data(img) else {
        return false;
    };
    for i in 0..filled {
        let at = slots + i * SLOT + 8;
        let passes = u32_at(img, at);
        if passes as usize == pass {
            img[at..at + 4].copy_from_slice(&(passes + 1).to_ne_bytes());
            return true;
        }
    }
    false
}

/// Range `index` of an image, if it holds one.
pub fn data_range(img: &[u8], index: usize) -> Option<Range> {
    let (_, filled, slots) = read_data(img)?;
    if index >= filled {
        return None;
    }
    let s = &img[slots + index * SLOT..slots + (index + 1) * SLOT];
    let cstr = |b: &[u8]| b[..b.iter().position(|&c| c == 0).unwrap_or(b.len())].to_vec();
    Some(Range {
        duration_ns: u64_at(s, 0),
        passes: u32_at(s, 8),
        launches: u32_at(s, 12),
        name: cstr(&s[16..16 + NAME_LEN]),
        subject: cstr(&s[16 + NAME_LEN..]),
    })
}

/// A range's name as the client sees it: nesting levels joined by `delimiter`.
pub fn display_name(name: &[u8], delimiter: &[u8]) -> Vec<u8> {
    name.split(|&b| b == LEVEL_SEP)
        .collect::<Vec<_>>()
        .join(delimiter)
}

#[cfg(test)]
mod tests;
