//! Time offsets as users write them (`--delay`, `RTRACE_DELAY`, ...).

/// Parses a time offset: a number with an optional unit (`s`, `ms`, `us`, `ns`; none means
/// seconds), e.g. `2`, `1.5s`, `250ms`, `30us`, `1500ns`.
pub fn parse_time(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, scale) = [
        ("ns", 1u64),
        ("us", 1_000),
        ("µs", 1_000),
        ("ms", 1_000_000),
        ("s", 1_000_000_000),
    ]
    .iter()
    .find_map(|&(unit, scale)| t.strip_suffix(unit).map(|n| (n.trim(), scale)))
    .unwrap_or((t, 1_000_000_000));
    let bad = || format!("'{s}' is not a time (e.g. 2, 1.5s, 250ms, 30us, 1500ns)");
    if num.is_empty() || num.starts_with(['-', '+']) {
        return Err(bad());
    }
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if !int.chars().all(|c| c.is_ascii_digit()) || !frac.chars().all(|c| c.is_ascii_digit()) {
        return Err(bad());
    }
    let int: u128 = if int.is_empty() {
        0
    } else {
        int.parse().map_err(|_| bad())?
    };
    // Digits below a nanosecond are cut off.
    let digits = scale.to_string().len() - 1;
    let frac_ns: u128 = if frac.is_empty() {
        0
    } else {
        let kept = &frac[..frac.len().min(digits)];
        let pad = digits - kept.len();
        if kept.is_empty() {
            0
        } else {
            kept.parse::<u128>().map_err(|_| bad())? * 10u128.pow(pad as u32)
        }
    };
    let ns = int * u128::from(scale) + frac_ns;
    u64::try_from(ns).map_err(|_| format!("'{s}' is too large"))
}
