//! The values of `rtrace record`'s options, checked before the program runs: each a usage
//! error (exit 2, clap's message) when it is not one librtrace.so takes.

use rtrace_format::env;

pub(super) fn check_time(s: &str) -> Result<String, String> {
    rtrace_format::parse_time(s).map(|_| s.to_string())
}

pub(super) fn check_metrics(s: &str) -> Result<String, String> {
    rtrace_format::metric_sets::resolve(s).map(|_| s.trim().to_string())
}

pub(super) fn check_regex(s: &str) -> Result<String, String> {
    crate::filter::parse_regex(s).map(|_| s.to_string())
}

/// `--buffer-records`: a power of two in the range librtrace.so takes.
pub(super) fn parse_buffer_records(s: &str) -> Result<u64, String> {
    let range = &env::BUFFER_RECORDS_RANGE;
    let n: u64 = s.trim().parse().map_err(|e| format!("{e}"))?;
    if !n.is_power_of_two() {
        Err(format!("{n} is not a power of two (e.g. 65536)"))
    } else if !range.contains(&n) {
        Err(format!(
            "{n} is out of range (give a power of two from {} to {})",
            range.start(),
            range.end()
        ))
    } else {
        Ok(n)
    }
}

/// `--flush-ms`: a period in the range librtrace.so takes.
pub(super) fn parse_flush_ms(s: &str) -> Result<u64, String> {
    let range = &env::FLUSH_MS_RANGE;
    let n: u64 = s.trim().parse().map_err(|e| format!("{e}"))?;
    if range.contains(&n) {
        Ok(n)
    } else {
        Err(format!(
            "{n} is out of range (give {} to {})",
            range.start(),
            range.end()
        ))
    }
}

/// `--pc-sampling`'s value: `1` (CUPTI's period) or a period 5..=31.
pub(super) fn check_period(v: &str) -> Result<String, String> {
    match v.parse::<u32>() {
        Ok(1) | Ok(5..=31) => Ok(v.to_string()),
        _ => Err(format!(
            "'{v}' is not a sampling period: give N in 5..31 (one sample every 2^N cycles)"
        )),
    }
}

/// `--runtime-api`'s value, as `RTRACE_RUNTIME_API`'s.
pub(super) fn check_runtime_route(v: &str) -> Result<String, String> {
    env::RuntimeRoute::from_option(v)
        .map(|r| r.name().to_string())
        .ok_or_else(|| format!("'{v}' is not a route: give cupti, interpose or none"))
}

/// `--pc-stalls`: comma-separated stall reasons, each CUPTI's name without
/// `smsp__pcsamp_warps_issue_stalled_` (lower-case letters, digits, `_`). Which a chip has is
/// known only on it: a name it lacks is said in the trace's notices and the run's summary.
pub(super) fn check_stalls(v: &str) -> Result<String, String> {
    let names: Vec<&str> = v.split(',').map(str::trim).collect();
    match names.iter().find(|n| {
        n.is_empty()
            || !n
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    }) {
        Some(bad) => Err(format!(
            "'{bad}' is not a stall reason's name: give CUPTI's names without \
             smsp__pcsamp_warps_issue_stalled_, comma-separated (long_scoreboard,mio_throttle)"
        )),
        None => Ok(names.join(",")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stall_lists() {
        assert_eq!(
            check_stalls("long_scoreboard, mio_throttle").unwrap(),
            "long_scoreboard,mio_throttle"
        );
        for bad in ["", "a,,b", "Long", "barrier;rm", "a b"] {
            assert!(check_stalls(bad).is_err(), "{bad}");
        }
    }
}
