//! Backing store of "device" memory: ordinary host memory, so copies, memsets and the built-in
//! kernels move real bytes that programs can check.

/// Alignment of every allocation (the real driver aligns to at least 256 bytes).
pub const ALIGN: usize = 256;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocKind {
    /// `cuMemAlloc_v2`: `posix_memalign`.
    Device,
    /// Legacy `cuMemAlloc`: an `mmap` below 4 GiB, so the address fits a 32-bit `CUdeviceptr_v1`.
    DeviceLow,
    /// `cuMemAllocHost[_v2]`: page-locked host memory, `posix_memalign` here.
    Host,
}

/// Allocates `size` (> 0) bytes of `kind`, zero-filled; `None` when the system refuses.
pub fn allocate(kind: AllocKind, size: usize) -> Option<u64> {
    match kind {
        AllocKind::Device | AllocKind::Host => {
            let mut p: *mut libc::c_void = std::ptr::null_mut();
            // SAFETY: `p` is a valid out-pointer and ALIGN is a power of two multiple of
            // sizeof(void*).
            if unsafe { libc::posix_memalign(&mut p, ALIGN, size) } != 0 || p.is_null() {
                return None;
            }
            // SAFETY: `p` points to `size` freshly allocated bytes.
            unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0, size) };
            Some(p as u64)
        }
        AllocKind::DeviceLow => allocate_low(size),
    }
}

#[cfg(target_arch = "x86_64")]
fn allocate_low(size: usize) -> Option<u64> {
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_32BIT,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    let addr = p as u64;
    if addr
        .checked_add(size as u64)
        .is_none_or(|end| end > u64::from(u32::MAX))
    {
        // SAFETY: `p` is the mapping just made, of `size` bytes.
        unsafe { libc::munmap(p, size) };
        return None;
    }
    Some(addr)
}

#[cfg(not(target_arch = "x86_64"))]
fn allocate_low(_size: usize) -> Option<u64> {
    None
}

/// Releases an allocation made by [`allocate`] with the same `kind` and `size`.
///
/// # Safety
/// `addr` must come from `allocate(kind, size)` and not have been released.
pub unsafe fn release(kind: AllocKind, addr: u64, size: usize) {
    match kind {
        // SAFETY: `addr` came from posix_memalign (caller's contract).
        AllocKind::Device | AllocKind::Host => unsafe { libc::free(addr as *mut libc::c_void) },
        // SAFETY: `addr` is a mapping of `size` bytes (caller's contract).
        AllocKind::DeviceLow => unsafe {
            libc::munmap(addr as *mut libc::c_void, size);
        },
    }
}
