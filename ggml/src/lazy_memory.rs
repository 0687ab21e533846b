//! Lazily zeroed host memory: an anonymous private mapping whose pages the kernel supplies as
//! zeros on first touch, so capacity that is never written never becomes resident.
//!
//! Used for decode caches (wrapped as a ggml CPU buffer through [`HostMemory`]) and for measuring
//! residency ([`resident_bytes`]), e.g. of libllama's lazily zeroed recurrent-state buffer.
//!
//! `MAP_NORESERVE` makes [`LazyZeroed::new`] fail only for address space (or under strict
//! overcommit, `vm.overcommit_memory = 2`, which ignores the flag and accounts the whole
//! length), as an `io::Error` (`ENOMEM`). Memory itself is taken page by page on first write:
//! a write that finds none is handled by the kernel as for any anonymous page (reclaim, swap,
//! the OOM killer), not reported here. The LFM2-Audio engine's policy for that is in
//! `lfm2_audio::limits` ("Out of memory").

use crate::HostMemory;
use std::io;
use std::ptr::NonNull;

/// An anonymous, private, read-write mapping (Linux/Unix), zero-filled on demand.
#[derive(Debug)]
pub struct LazyZeroed {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned exclusively by this value; nothing ties it to the
// creating thread.
unsafe impl Send for LazyZeroed {}
// SAFETY: `&LazyZeroed` only exposes the address, the length and residency queries, none of which
// write the memory.
unsafe impl Sync for LazyZeroed {}

impl LazyZeroed {
    /// Maps `len` bytes (rounded up to whole pages by the kernel). Nothing is resident yet.
    pub fn new(len: usize) -> io::Result<LazyZeroed> {
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "zero-length mapping",
            ));
        }
        // SAFETY: a fresh anonymous private mapping at a kernel-chosen address; no existing memory
        // is affected. MAP_NORESERVE: capacity is promised lazily, like the pages themselves.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(io::Error::last_os_error)?;
        Ok(LazyZeroed { ptr, len })
    }

    /// Start address.
    pub fn addr(&self) -> usize {
        self.ptr.as_ptr() as usize
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never: `new` refuses zero).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Returns every page to the kernel; the memory reads as zeros afterwards. On Linux this is
    /// `madvise(MADV_DONTNEED)`, which guarantees zero-fill for private anonymous mappings;
    /// elsewhere the memory is overwritten with zeros (same contents, pages stay resident).
    pub fn discard(&mut self) -> io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: the range is exactly our own mapping; `&mut self` guarantees no live borrow
            // of its contents exists on the Rust side.
            let rc =
                unsafe { libc::madvise(self.ptr.as_ptr().cast(), self.len, libc::MADV_DONTNEED) };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            // SAFETY: the range is our own writable mapping, exclusively borrowed.
            unsafe { std::ptr::write_bytes(self.ptr.as_ptr(), 0, self.len) };
        }
        Ok(())
    }

    /// Bytes of this mapping currently resident in RAM.
    pub fn resident_bytes(&self) -> io::Result<usize> {
        resident_bytes(self.addr(), self.len)
    }
}

impl Drop for LazyZeroed {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the range `new` mapped, once.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

// SAFETY: the mapping's address never changes while this value exists (it is unmapped only in
// Drop) and `len` is its exact length.
unsafe impl HostMemory for LazyZeroed {
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    fn len(&self) -> usize {
        self.len
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// Resident bytes of the pages overlapping `[addr, addr + len)` (whole pages), via `mincore`.
/// Any address range may be asked about: the kernel validates it and an unmapped range is an
/// error (`ENOMEM`), never a crash.
pub fn resident_bytes(addr: usize, len: usize) -> io::Result<usize> {
    if len == 0 {
        return Ok(0);
    }
    let page = page_size();
    let start = addr & !(page - 1);
    let end = addr
        .checked_add(len)
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let pages = (end - start).div_ceil(page);
    let mut vec = vec![0u8; pages];
    // SAFETY: mincore only reads the kernel's page tables for the range (it validates that the
    // range is mapped and fails with ENOMEM otherwise) and writes one byte per page into `vec`,
    // which has exactly `pages` bytes.
    let rc = unsafe {
        libc::mincore(
            start as *mut libc::c_void,
            end - start,
            vec.as_mut_ptr().cast(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(vec.iter().filter(|&&b| b & 1 != 0).count() * page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_become_resident_on_write_and_leave_on_discard() {
        let page = page_size();
        let mut m = LazyZeroed::new(64 * page).unwrap();
        assert_eq!(m.resident_bytes().unwrap(), 0);
        let p = m.as_mut_ptr();
        for i in [0, 5, 63] {
            // SAFETY: inside our own writable mapping.
            unsafe { *p.add(i * page) = 7 };
        }
        assert_eq!(m.resident_bytes().unwrap(), 3 * page);
        m.discard().unwrap();
        #[cfg(target_os = "linux")]
        assert_eq!(m.resident_bytes().unwrap(), 0);
        // SAFETY: inside our own mapping; discarded pages read as zero.
        assert_eq!(unsafe { *p.add(5 * page) }, 0);
    }

    #[test]
    fn unmapped_ranges_are_errors() {
        // The first pages of the address space are never mapped (vm.mmap_min_addr).
        assert!(resident_bytes(page_size(), page_size()).is_err());
    }
}
