//! Giving freed memory back to the operating system.
//!
//! glibc's allocator keeps what a burst of work freed (a thousand Target clients released at
//! once) in its arenas: the memory is reused, but the process's RSS stays at its peak. After the
//! host releases memory in bulk, [`release_freed`] asks glibc to return whole free pages
//! (`malloc_trim`). The static (musl) image needs no help: musl unmaps freed memory itself.
//!
//! Owns: the allocator calls (trim, statistics). Must not touch: anything that allocates.

/// Returns free pages of the allocator's arenas to the operating system (glibc; elsewhere a
/// no-op). Costs a walk over the arenas: call it after releasing much, not per request.
pub fn release_freed() {
    #[cfg(feature = "mimalloc")]
    // SAFETY: mi_collect only frees mimalloc's own unused pages; callable from any thread.
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
    #[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
    // SAFETY: `arena.<MALLCTL_ARENAS_ALL>.purge` takes no input and no output; it returns the
    // dirty pages of every arena to the operating system.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            c"arena.4096.purge".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
    }
    #[cfg(glibc_malloc)]
    // SAFETY: malloc_trim only walks and trims glibc's own arenas; it takes their locks and is
    // safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// What the allocator holds, by glibc's own count (`mallinfo2`): bytes handed out and not freed,
/// and free bytes its arenas keep. Their sum against the RSS tells memory in use from memory
/// kept: pages only partly free stay resident after `malloc_trim`. `None` elsewhere (musl,
/// another global allocator).
pub fn heap() -> Option<Heap> {
    #[cfg(glibc_malloc)]
    {
        // SAFETY: mallinfo2 only reads glibc's arena statistics under their locks.
        let info = unsafe { libc::mallinfo2() };
        Some(Heap {
            in_use: (info.uordblks + info.hblkhd) as u64,
            free: info.fordblks as u64,
        })
    }
    #[cfg(not(glibc_malloc))]
    {
        None
    }
}

/// The allocator's own count ([`heap`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heap {
    /// Allocated and not freed (in the arenas, and in chunks mapped on their own).
    pub in_use: u64,
    /// Free space the arenas keep for reuse.
    pub free: u64,
}

#[cfg(test)]
mod tests {
    #[test]
    fn releasing_freed_memory_is_harmless() {
        let big: Vec<Vec<u8>> = (0..64).map(|_| vec![1u8; 64 * 1024]).collect();
        drop(big);
        super::release_freed();
        let again = vec![2u8; 1024];
        assert_eq!(again[1023], 2);
    }

    #[cfg(glibc_malloc)]
    #[test]
    fn the_heap_count_sees_what_is_allocated_and_freed() {
        let before = super::heap().expect("glibc counts its heap").in_use;
        // 128 MiB in small and in mapped chunks; other tests allocate beside this one, so only
        // a wide margin is certain.
        let held: Vec<Vec<u8>> = (0..1024)
            .map(|i| vec![1u8; if i % 2 == 0 { 16 << 10 } else { 240 << 10 }])
            .collect();
        let during = super::heap().unwrap().in_use;
        assert!(during >= before + (96 << 20), "{before} -> {during}");
        drop(held);
        let after = super::heap().unwrap().in_use;
        assert!(after + (96 << 20) <= during, "{during} -> {after}");
    }
}
