//! Giving freed memory back to the operating system.
//!
//! glibc's allocator keeps what a burst of work freed (a thousand Target clients released at
//! once) in its arenas: the memory is reused, but the process's RSS stays at its peak. After the
//! host releases memory in bulk, [`release_freed`] asks glibc to return whole free pages
//! (`malloc_trim`). The static (musl) image needs no help: musl unmaps freed memory itself.
//!
//! Owns: the one allocator call. Must not touch: anything that allocates.

/// Returns free pages of the allocator's arenas to the operating system (glibc; elsewhere a
/// no-op). Costs a walk over the arenas: call it after releasing much, not per request.
pub fn release_freed() {
    #[cfg(feature = "mimalloc")]
    // SAFETY: mi_collect only frees mimalloc's own unused pages; callable from any thread.
    unsafe {
        libmimalloc_sys::mi_collect(true);
    }
    #[cfg(all(target_os = "linux", target_env = "gnu", not(feature = "mimalloc")))]
    // SAFETY: malloc_trim only walks and trims glibc's own arenas; it takes their locks and is
    // safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
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
}
