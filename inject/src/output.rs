//! The trace file: its path, its header and the buffered writer the consumer uses.

use crate::generated::id::FUNCTION_NAMES;
use crate::region::GpuRegion;
use crate::ring::{Region, Ring, FIRST_SLOTS};
use crate::state::{self, UNWRAPPED_LOOKUPS};
use crate::trace_fd::TraceFd;
use crate::{clock, files, sys};
use rtrace_format::{
    encode_file_header, encode_function_names, encode_value_into, expand_output, hostname,
    ChunkHeader, ChunkKind, ProcessEndRef, ProcessHeader, ThreadInfoRef, STATUS_TRACE,
};
use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::atomic::Ordering;
use std::sync::Arc;

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

fn command_line() -> Vec<String> {
    std::fs::read("/proc/self/cmdline")
        .unwrap_or_default()
        .split(|&b| b == 0)
        .filter(|s| !s.is_empty())
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect()
}

/// The consumer's side of the trace file: the descriptor and reusable buffers.
pub struct Sink {
    fd: &'static TraceFd,
    /// Times the file was opened again that a notice said.
    reopened_said: u32,
    /// Where the next chunk goes: the end of what was written and reserved.
    end: u64,
    /// Rings whose entries up to a position are in `pending`: released once it is written.
    pub releases: Vec<(Arc<Ring>, u64)>,
    /// Encoded chunks waiting to be written.
    pub pending: Vec<u8>,
    /// Scratch list of the rings being drained.
    pub scratch: Vec<Arc<Ring>>,
    /// Converts the rings' raw timestamps to ns.
    pub calibration: crate::clock::Calibration,
    /// GPU records waiting to become chunks.
    pub gpu_batch: crate::gpu_batch::GpuBatch,
    /// CUPTI correlation id → rtrace correlation id, from link records.
    pub links: crate::gpu_batch::Links,
    /// Scratch space for one thread's NVTX events.
    pub nvtx: Vec<u8>,
    pub records: u64,
    pub dropped: u64,
    pub threads: u64,
    /// A write failed (with this `errno`): nothing more is written.
    broken: Option<i32>,
    /// Whether the notice that a ring could not grow was written.
    pub grow_error_said: bool,
    /// CUPTI buffers whose records are in `pending`: cleared once it is written, then in
    /// `gpu_freed` for CUPTI again.
    pub gpu_written: Vec<&'static GpuRegion>,
    pub gpu_freed: Vec<&'static GpuRegion>,
    /// Whether the GPU buffer layout chunk was written.
    gpu_layout_written: bool,
    /// Every CUPTI buffer in the file (their blocks go back at the end when they hold nothing).
    gpu_regions: Vec<&'static GpuRegion>,
}

const FLUSH_AT: usize = 1 << 20;

impl Sink {
    /// Creates the trace file of process `pid` (forked from `forked_from`), exclusively and
    /// beside its name when that is taken ([`files::create_beside`]), and writes its header
    /// (with the `rtrace record` run's token), its function table and, when it went beside
    /// its name, a notice that says so; then names it in `rtrace record`'s status directory.
    pub fn create(pid: u32, forked_from: Option<u32>) -> Result<Sink, String> {
        let cfg = state::config();
        let host = hostname();
        let var = |name: &[u8]| {
            let found = cfg.output_vars.iter().find(|(n, _)| n == name);
            found.map(|(_, value)| value.clone())
        };
        let name = expand_output(cfg.output.as_bytes(), pid, host.as_bytes(), &var);
        let replace = cfg.force_overwrite.then_some(cfg.session.as_str());
        let created = files::create_beside(&name, replace)?;
        let path = OsString::from_vec(created.path.clone());
        let header = ProcessHeader {
            pid,
            ppid: sys::getppid(),
            forked_from,
            command_line: command_line(),
            executable: std::fs::read_link("/proc/self/exe")
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default(),
            hostname: host,
            boot_id: read_trimmed("/proc/sys/kernel/random/boot_id"),
            writer_version: env!("CARGO_PKG_VERSION").into(),
            start: clock::anchor(),
            clock: "CLOCK_MONOTONIC".into(),
            session: cfg.session.clone(),
            rank_env: cfg.rank_env.clone(),
        };
        let fd = TraceFd::new(created.fd, &created.path).map_err(|e| {
            format!(
                "cannot write {}: {}",
                path.to_string_lossy(),
                files::plain(&e)
            )
        })?;
        let fd: &'static TraceFd = Box::leak(Box::new(fd));
        let mut sink = Sink {
            fd,
            reopened_said: 0,
            end: 0,
            releases: Vec::with_capacity(256),
            pending: Vec::with_capacity(FLUSH_AT + (cfg.buffer_records * 32) + 4096),
            scratch: Vec::with_capacity(256),
            calibration: crate::clock::Calibration::new(),
            gpu_batch: Default::default(),
            links: Default::default(),
            nvtx: Vec::new(),
            records: 0,
            dropped: 0,
            threads: 0,
            broken: None,
            grow_error_said: false,
            gpu_written: Vec::new(),
            gpu_freed: Vec::new(),
            gpu_layout_written: false,
            gpu_regions: Vec::new(),
        };
        sink.pending.extend_from_slice(&encode_file_header(&header));
        let names = encode_function_names(
            FUNCTION_NAMES
                .iter()
                .enumerate()
                .map(|(i, n)| (i as u32, *n)),
        );
        sink.chunk(ChunkKind::FunctionNames, 0, 0, 0, &names);
        if created.beside {
            sink.notice(&format!(
                "{} was taken: this trace is written beside it, as {}",
                String::from_utf8_lossy(&name),
                path.to_string_lossy()
            ));
        }
        if created.replaced {
            sink.notice(&format!(
                "an earlier {} was replaced ({}=1)",
                path.to_string_lossy(),
                rtrace_format::env::FORCE_OVERWRITE
            ));
        }
        if let Err(e) = sink.flush() {
            if let Ok(fd) = fd.get() {
                sys::close(fd);
            }
            return Err(format!(
                "cannot write {}: {}",
                path.to_string_lossy(),
                files::plain(&e)
            ));
        }
        crate::diag::log(&["writing ", &path.to_string_lossy()]);
        if let Some(dir) = &cfg.status_dir {
            let mut line = created.path;
            line.push(b'\n');
            files::leave_status(dir, STATUS_TRACE, pid, &line);
        }
        Ok(sink)
    }

    /// Appends the GPU records converted so far as chunks ([`crate::gpu_batch::GpuBatch::emit`]).
    pub fn write_gpu_batch(&mut self) {
        let mut batch = std::mem::take(&mut self.gpu_batch);
        batch.emit(|kind, payload| self.chunk(kind, 0, 0, 0, payload));
        self.gpu_batch = batch;
    }

    /// Appends one chunk to the pending output.
    pub fn chunk(&mut self, kind: ChunkKind, thread: u64, seq: u64, dropped: u64, payload: &[u8]) {
        let h = ChunkHeader::new(kind, thread, seq, dropped, payload);
        self.pending.extend_from_slice(&h.encode());
        self.pending.extend_from_slice(payload);
    }

    /// Starts a chunk whose payload the caller appends to `pending` (no copy); returns where
    /// it starts, for [`Sink::close_chunk`] or [`Sink::drop_chunk`].
    pub fn open_chunk(&mut self) -> usize {
        let at = self.pending.len();
        self.pending
            .extend_from_slice(&[0; rtrace_format::CHUNK_HEADER_LEN]);
        at
    }

    /// Ends the chunk opened at `at`: its header, over what was appended since.
    pub fn close_chunk(&mut self, at: usize, kind: ChunkKind, thread: u64, seq: u64, dropped: u64) {
        let body = at + rtrace_format::CHUNK_HEADER_LEN;
        let h = ChunkHeader::new(kind, thread, seq, dropped, &self.pending[body..]);
        self.pending[at..body].copy_from_slice(&h.encode());
    }

    /// Forgets the chunk opened at `at` and what was appended since.
    pub fn drop_chunk(&mut self, at: usize) {
        self.pending.truncate(at);
    }

    /// Appends a thread's ThreadInfo chunk (no allocation).
    pub fn thread_info(&mut self, tid: u64, name: &str) {
        let mut buf = [0u8; 128];
        let name = &name[..name.len().min(64)];
        if let Ok(n) = encode_value_into(&ThreadInfoRef { tid, name }, &mut buf) {
            self.chunk(ChunkKind::ThreadInfo, tid, 0, 0, &buf[..n]);
        }
        self.threads += 1;
    }

    /// Appends a notice chunk.
    pub fn notice(&mut self, message: &str) {
        let payload = rtrace_format::encode_value(&rtrace_format::Notice {
            time_ns: clock::now_ns(),
            message: message.to_string(),
        });
        self.chunk(ChunkKind::Notice, 0, 0, 0, &payload);
    }

    pub fn should_flush(&self) -> bool {
        self.pending.len() >= FLUSH_AT
    }

    /// Writes what is pending, then lets the rings drained into it reuse those slots.
    pub fn flush(&mut self) -> io::Result<()> {
        if let Some(errno) = self.broken {
            // The first failure's cause, for whoever notes it.
            self.pending.clear();
            return Err(io::Error::from_raw_os_error(errno));
        }
        // The descriptor is checked only when there is something to write through it.
        let r = match self.pending.is_empty() {
            true => Ok(()),
            false => self.fd.get().and_then(|fd| {
                self.say_reopened();
                sys::pwrite_all(fd, &self.pending, self.end)
            }),
        };
        match &r {
            Ok(()) => {
                self.end += self.pending.len() as u64;
                for (ring, to) in self.releases.drain(..) {
                    ring.release(to);
                }
                for region in self.gpu_written.drain(..) {
                    region.clear();
                    self.gpu_freed.push(region);
                }
            }
            Err(e) => {
                // The entries stay in their rings, where a reader finds them.
                let errno = e.raw_os_error().unwrap_or(libc::EIO) as u64;
                if errno == libc::EFBIG as u64 {
                    self.say_size_limit();
                }
                for (ring, _) in self.releases.drain(..) {
                    ring.region().set_write_error(errno);
                }
                self.broken = Some(errno as i32);
            }
        }
        self.pending.clear();
        r
    }

    /// Appends a notice when the file was opened again since the last one said so.
    fn say_reopened(&mut self) {
        let n = self.fd.reopened();
        if n > self.reopened_said {
            self.reopened_said = n;
            self.notice(
                "the program closed or replaced the trace file's descriptor: the file was \
                 opened again by its path, and nothing was written to the program's files",
            );
        }
    }

    /// The file reached the file size limit: a notice that says so, written at once where it
    /// still fits (what was pending is not written: the notice is all a reader may learn, when
    /// no thread's buffer is in the file to hold the write's failure).
    fn say_size_limit(&mut self) {
        // (A file system's own largest file gives EFBIG too: no notice of a limit then.)
        let Some(most) = sys::file_size_limit() else {
            return;
        };
        let payload = rtrace_format::encode_value(&rtrace_format::Notice {
            time_ns: clock::now_ns(),
            message: format!(
                "{} (RLIMIT_FSIZE, `ulimit -f`: {most} bytes): nothing more is written",
                rtrace_format::SIZE_LIMIT_NOTICE
            ),
        });
        let h = ChunkHeader::new(ChunkKind::Notice, 0, 0, 0, &payload);
        let mut chunk = h.encode().to_vec();
        chunk.extend_from_slice(&payload);
        if let Ok(fd) = self.fd.get() {
            if sys::pwrite_all(fd, &chunk, self.end).is_ok() {
                self.end += chunk.len() as u64;
            }
        }
    }

    /// Whether a write of the trace failed (nothing more is written).
    pub fn is_broken(&self) -> bool {
        self.broken.is_some()
    }

    /// Appends a ring region of `capacity` slots (a power of two) to the file, after what is
    /// pending, and maps it: its live page and first [`FIRST_SLOTS`] slots get disk blocks.
    pub fn reserve_region(&mut self, capacity: u64) -> io::Result<&'static Region> {
        use rtrace_format::ring::{region_layout, RingDescriptor, RING_LAYOUT, RING_PAGE};
        if sys::page_size() != RING_PAGE {
            return Err(io::Error::other("the page size is not 4 KiB"));
        }
        self.flush()?;
        let at = self.end;
        let (len, live_at) = region_layout(at, capacity);
        let descriptor = RingDescriptor {
            layout: RING_LAYOUT,
            slot_size: rtrace_format::ApiRecord::SIZE as u32,
            capacity,
            live_at,
            tsc: u32::from(clock::uses_tsc()),
        }
        .to_bytes();
        let (live, region_end) =
            self.live_chunk(ChunkKind::RingRegion, &descriptor, len, live_at)?;
        let first = FIRST_SLOTS.min(capacity);
        let slot = rtrace_format::ApiRecord::SIZE as u64;
        let file = self.fd;
        let mapped = (|| {
            let fd = file.get()?;
            sys::allocate(fd, live, RING_PAGE as u64 + first * slot)?;
            sys::extend_to(fd, region_end)?;
            sys::map_file(fd, live, RING_PAGE + (capacity * slot) as usize)
        })();
        let p = self.or_take_back(at, mapped)?;
        sys::populate(p, RING_PAGE + (first * slot) as usize);
        let region = Region::new(p, capacity, Some((self.fd, live + RING_PAGE as u64)));
        region.set_allocated(first);
        Ok(Box::leak(Box::new(region)))
    }

    /// `made`, the live chunk written at `at` made usable; where that failed, the chunk is
    /// taken back (the file ends at `at` again, and what is written next goes there): no header
    /// in the file claims a payload it does not hold.
    fn or_take_back<T>(&mut self, at: u64, made: io::Result<T>) -> io::Result<T> {
        if made.is_err() {
            self.end = at;
            if let Ok(fd) = self.fd.get() {
                let _ = sys::truncate_to(fd, at);
            }
        }
        made
    }

    /// Writes, at the end of the file (nothing pending), the header and descriptor of a chunk
    /// of kind `kind` flagged [`rtrace_format::ring::FLAG_LIVE`] whose payload of `payload_len`
    /// bytes has its live page at `live_at`; what follows goes after it. Returns the file
    /// offsets of the live page and of the chunk's end.
    fn live_chunk(
        &mut self,
        kind: ChunkKind,
        descriptor: &[u8],
        payload_len: u32,
        live_at: u32,
    ) -> io::Result<(u64, u64)> {
        let at = self.end;
        let mut header = ChunkHeader::new(kind, 0, 0, 0, descriptor);
        header.flags = rtrace_format::ring::FLAG_LIVE;
        header.payload_len = payload_len;
        header.crc = header.checksum(descriptor);
        let mut head = header.encode().to_vec();
        head.extend_from_slice(descriptor);
        sys::pwrite_all(self.fd.get()?, &head, at)?;
        // From here the file holds the chunk: what follows goes after it.
        let payload_at = at + rtrace_format::CHUNK_HEADER_LEN as u64;
        self.end = payload_at + u64::from(payload_len);
        Ok((payload_at + u64::from(live_at), self.end))
    }

    /// The file offset where what is pending will be written.
    pub fn pending_at(&self) -> u64 {
        self.end
    }

    /// Appends a CUPTI buffer of `len` bytes (a multiple of the page size) to the file, after
    /// what is pending, with its disk blocks, and maps it; `layout` (how to read it) goes
    /// before the first one.
    pub fn reserve_gpu_region(
        &mut self,
        len: u64,
        layout: &rtrace_format::gpu_region::GpuBufferLayout,
    ) -> io::Result<&'static GpuRegion> {
        use rtrace_format::gpu_region::{
            gpu_region_layout, GpuRegionDescriptor, GPU_REGION_LAYOUT,
        };
        use rtrace_format::ring::RING_PAGE;
        if sys::page_size() != RING_PAGE {
            return Err(io::Error::other("the page size is not 4 KiB"));
        }
        if !self.gpu_layout_written {
            let payload = rtrace_format::encode_value(layout);
            self.chunk(ChunkKind::GpuBufferLayout, 0, 0, 0, &payload);
            self.gpu_layout_written = true;
        }
        self.flush()?;
        let at = self.end;
        let (payload_len, live_at) = gpu_region_layout(at, len);
        let descriptor = GpuRegionDescriptor {
            layout: GPU_REGION_LAYOUT,
            live_at,
            len,
        }
        .to_bytes();
        let (live, _) = self.live_chunk(
            ChunkKind::GpuBufferRegion,
            &descriptor,
            payload_len,
            live_at,
        )?;
        let mapped = RING_PAGE + len as usize;
        let file = self.fd;
        let made = file
            .get()
            .and_then(|fd| sys::allocate(fd, live, mapped as u64).map(|()| fd))
            .and_then(|fd| sys::map_file(fd, live, mapped));
        let p = self.or_take_back(at, made)?;
        sys::populate(p, mapped);
        let region: &'static GpuRegion = Box::leak(Box::new(GpuRegion::new(
            p,
            len as usize,
            self.fd,
            live + RING_PAGE as u64,
        )));
        self.gpu_regions.push(region);
        Ok(region)
    }

    /// Writes the end record and everything pending (no allocation).
    pub fn write_end(&mut self, reason: &str) -> io::Result<()> {
        let end = ProcessEndRef {
            end: clock::anchor(),
            reason,
            records: self.records,
            dropped: self.dropped,
            unwrapped_lookups: UNWRAPPED_LOOKUPS.load(Ordering::Relaxed),
            threads: self.threads,
        };
        let mut buf = [0u8; 512];
        let n = encode_value_into(&end, &mut buf).map_err(io::Error::other)?;
        self.chunk(ChunkKind::ProcessEnd, 0, 0, 0, &buf[..n]);
        let written = self.flush();
        for region in &self.gpu_regions {
            region.give_back_blocks();
        }
        written
    }
}
