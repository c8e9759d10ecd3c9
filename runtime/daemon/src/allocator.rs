//! The daemon's allocator, jemalloc, returning freed memory to the system
//! (spec/decisions/0024-the-daemon-allocator.md).

/// Starts jemalloc's background thread, which gives dirty pages back to the
/// system after its decay time whether or not the process is busy. It is
/// started here rather than by the allocator's build configuration: the
/// helpers the daemon starts from its own binary (the sandbox's stages)
/// must stay single-threaded to enter their namespaces. Without jemalloc
/// as the global allocator this does nothing harmful.
pub fn return_freed_memory() {
    if let Err(e) = tikv_jemalloc_ctl::background_thread::write(true) {
        eprintln!("warning: jemalloc's background thread did not start: {e}");
    }
}
