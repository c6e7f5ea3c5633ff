//! Writing the export on a thread of its own ([`write_behind`]): the encoding hands the
//! output over a megabyte at a time and goes on while the system copies it out.

use std::io::{self, Write};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

/// Bytes gathered before they are handed to the writing thread.
const BLOCK: usize = 1 << 20;
/// Blocks handed over and not yet written, at most (16 MiB).
const QUEUED: usize = 16;

/// The output as [`write_behind`] gives it to the encoding: a [`Write`] that gathers
/// [`BLOCK`] bytes and hands them to the writing thread.
pub struct Behind {
    buf: Vec<u8>,
    send: SyncSender<Vec<u8>>,
    /// Blocks written, handed back to be filled again.
    spare: Receiver<Vec<u8>>,
}

impl Behind {
    /// Hands what is gathered to the writing thread; an error when that thread stopped (the
    /// output failed: [`write_behind`] gives its error).
    fn hand_over(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let next = self
            .spare
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BLOCK));
        let full = std::mem::replace(&mut self.buf, next);
        self.send
            .send(full)
            .map_err(|_| io::Error::other("the output's writing thread stopped"))
    }
}

impl Write for Behind {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        // What does not fit goes into the next block: a block is filled, not moved to a
        // larger one.
        if !self.buf.is_empty() && self.buf.len() + data.len() > self.buf.capacity() {
            self.hand_over()?;
        }
        self.buf.extend_from_slice(data);
        if self.buf.len() >= BLOCK {
            self.hand_over()?;
        }
        Ok(data.len())
    }

    /// Hands over what is gathered (it is written when [`write_behind`] returns).
    fn flush(&mut self) -> io::Result<()> {
        self.hand_over()
    }
}

/// Runs `encode` with an output whose bytes are written to `out`, in order, on a thread of
/// its own; returns what `encode` returned and how writing `out` (then flushing it) ended.
/// Once a write fails the thread stops, and the encoding's next hand-over fails too.
pub fn write_behind<W: Write + Send, T>(
    mut out: W,
    encode: impl FnOnce(&mut Behind) -> T,
) -> (T, io::Result<()>) {
    let (send, blocks) = sync_channel::<Vec<u8>>(QUEUED);
    let (give_back, spare) = sync_channel::<Vec<u8>>(QUEUED + 2);
    std::thread::scope(|s| {
        let writer = s.spawn(move || {
            for mut block in blocks {
                out.write_all(&block)?;
                block.clear();
                let _ = give_back.try_send(block);
            }
            out.flush()
        });
        let mut behind = Behind {
            buf: Vec::with_capacity(BLOCK),
            send,
            spare,
        };
        let encoded = encode(&mut behind);
        let last = behind.hand_over();
        // The writing thread ends with the last block.
        drop(behind);
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the output's writing thread failed")));
        (encoded, written.and(last))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer the test can read back after the writing thread is done with it.
    struct Shared<'a>(&'a std::sync::Mutex<Vec<u8>>);

    impl Write for Shared<'_> {
        fn write(&mut self, d: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(d);
            Ok(d.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn bytes_arrive_in_order() {
        let shared = std::sync::Mutex::new(Vec::new());
        let mut want = Vec::new();
        let (n, written) = write_behind(Shared(&shared), |b| {
            for i in 0..3000usize {
                let piece = vec![i as u8; (i * 7919) % 4096];
                b.write_all(&piece).unwrap();
                want.extend_from_slice(&piece);
            }
            b.flush().unwrap();
            b.write_all(b"tail").unwrap();
            7
        });
        want.extend_from_slice(b"tail");
        assert_eq!(n, 7);
        assert!(written.is_ok());
        assert!(want.len() > 3 * BLOCK);
        assert_eq!(shared.into_inner().unwrap(), want);
    }

    #[test]
    fn a_failed_write_is_returned() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::new(io::ErrorKind::BrokenPipe, "closed"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let (tried, written) = write_behind(Full, |b| {
            // Enough blocks that a hand-over finds the thread stopped.
            (0..64)
                .map(|_| b.write_all(&[1u8; BLOCK]))
                .find(Result::is_err)
        });
        assert_eq!(tried.map(|e| e.is_err()), Some(true));
        assert_eq!(written.unwrap_err().kind(), io::ErrorKind::BrokenPipe);
    }
}
