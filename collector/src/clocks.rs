//! Putting traces from several hosts on one clock.
//!
//! Every timestamp in a trace is its host's `CLOCK_MONOTONIC`, which processes on one host
//! (one boot: the header's boot id) share, and which means nothing on another host. Each file
//! header carries a start anchor: `CLOCK_MONOTONIC` and `CLOCK_REALTIME` read together when
//! tracing started. Traces of another boot than the reference (the boot of the process that
//! started first, by its realtime anchor) are shifted by the difference of the two boots'
//! (realtime - monotonic) offsets, so that their times are on the reference's monotonic clock.
//! That is as exact as the hosts' realtime clocks agree (NTP: typically within a millisecond;
//! PTP: microseconds); processes of one boot are never shifted.

use rtrace_format::ProcessHeader;

/// How one trace is put on the reference clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shift {
    /// Added to every timestamp of the trace, ns.
    pub ns: i64,
    /// The reference: host name and boot id.
    pub reference_host: String,
    pub reference_boot: String,
}

/// The shift of each header (in order): `None` for traces of the reference boot.
pub fn shifts(headers: &[&ProcessHeader]) -> Vec<Option<Shift>> {
    let Some(reference) = headers
        .iter()
        .enumerate()
        .min_by_key(|&(i, h)| (h.start.realtime_ns, i))
        .map(|(_, h)| *h)
    else {
        return Vec::new();
    };
    let offset =
        |h: &ProcessHeader| i128::from(h.start.realtime_ns) - i128::from(h.start.monotonic_ns);
    headers
        .iter()
        .map(|h| {
            if h.boot_id == reference.boot_id {
                return None;
            }
            let ns = (offset(h) - offset(reference)).clamp(i64::MIN.into(), i64::MAX.into()) as i64;
            Some(Shift {
                ns,
                reference_host: reference.hostname.clone(),
                reference_boot: reference.boot_id.clone(),
            })
        })
        .collect()
}

/// `t + delta`, kept in `0..=u64::MAX`; 0 (an unknown time) stays 0.
pub fn shifted(t: u64, delta: i64) -> u64 {
    if t == 0 {
        return 0;
    }
    (i128::from(t) + i128::from(delta)).clamp(0, u64::MAX.into()) as u64
}

/// The shift in words, for reports: `+12.000000500 s onto the clock of host a (boot id b),
/// from the hosts' realtime clocks`.
pub fn describe(s: &Shift) -> String {
    let sign = if s.ns < 0 { '-' } else { '+' };
    let abs = s.ns.unsigned_abs();
    format!(
        "shifted {sign}{}.{:09} s onto the clock of host {} (boot id {}), from the hosts' \
         realtime clocks",
        abs / 1_000_000_000,
        abs % 1_000_000_000,
        s.reference_host,
        s.reference_boot
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtrace_format::ClockAnchor;

    fn header(host: &str, boot: &str, mono: u64, real: u64) -> ProcessHeader {
        ProcessHeader {
            hostname: host.into(),
            boot_id: boot.into(),
            start: ClockAnchor {
                monotonic_ns: mono,
                realtime_ns: real,
            },
            ..Default::default()
        }
    }

    #[test]
    fn other_boots_are_shifted_onto_the_first_started() {
        // Host a booted at realtime 1000 s (its monotonic 0); host b at realtime 1500 s.
        let a1 = header("a", "A", 100_000_000_000, 1_100_000_000_000);
        let a2 = header("a", "A", 200_000_000_000, 1_200_000_000_000);
        let b = header("b", "B", 30_000_000_000, 1_530_000_000_000);
        let s = shifts(&[&a2, &b, &a1]);
        assert_eq!(s[0], None);
        assert_eq!(s[2], None);
        // b's monotonic t is realtime 1500 s + t, which is a's monotonic t + 500 s.
        assert_eq!(
            s[1],
            Some(Shift {
                ns: 500_000_000_000,
                reference_host: "a".into(),
                reference_boot: "A".into(),
            })
        );
        assert_eq!(
            describe(s[1].as_ref().unwrap()),
            "shifted +500.000000000 s onto the clock of host a (boot id A), from the hosts' \
             realtime clocks"
        );
        // The earliest start by realtime is the reference, whatever the input order.
        let s = shifts(&[&b, &a1]);
        assert_eq!(s[0].as_ref().map(|s| s.ns), Some(500_000_000_000));
        assert_eq!(s[1], None);
        assert!(shifts(&[]).is_empty());
    }

    #[test]
    fn shifting_keeps_unknown_times_and_stays_in_range() {
        assert_eq!(shifted(0, 5), 0);
        assert_eq!(shifted(10, -4), 6);
        assert_eq!(shifted(10, -40), 0);
        assert_eq!(shifted(u64::MAX - 1, 5), u64::MAX);
    }
}
