//! Diagnostics on stderr through raw `write(2)`, enabled by `RTRACE_DEBUG=1`.
//! Never stdio: the host may hold its locks.

use std::sync::atomic::{AtomicBool, Ordering};

static ENABLED: AtomicBool = AtomicBool::new(false);

pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Writes `rtrace[pid]: <parts...>\n` to fd 2 with no allocation and no lock.
pub fn log(parts: &[&str]) {
    if !enabled() {
        return;
    }
    let mut buf = [0u8; 512];
    let mut n = 0;
    let mut push = |s: &[u8]| {
        let k = s.len().min(buf.len() - n);
        buf[n..n + k].copy_from_slice(&s[..k]);
        n += k;
    };
    push(b"rtrace[");
    let mut digits = [0u8; 20];
    push(format_u64(std::process::id() as u64, &mut digits));
    push(b"]: ");
    for p in parts {
        push(p.as_bytes());
    }
    push(b"\n");
    crate::sys::write_stderr(&buf[..n]);
}

/// Formats `v` in decimal into `out` without allocating.
pub fn format_u64(mut v: u64, out: &mut [u8; 20]) -> &[u8] {
    let mut i = out.len();
    loop {
        i -= 1;
        out[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &out[i..]
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_numbers() {
        let mut b = [0u8; 20];
        assert_eq!(super::format_u64(0, &mut b), b"0");
        assert_eq!(super::format_u64(1234567890123, &mut b), b"1234567890123");
        assert_eq!(super::format_u64(u64::MAX, &mut b), b"18446744073709551615");
    }
}
