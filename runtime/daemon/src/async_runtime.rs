//! The async runtime the daemon and its commands run on.

/// A multi-threaded runtime with one worker per processor but one, left
/// to the libSQL store's writer thread, which looks for its next commit
/// between commits (decision 0042). `TOKIO_WORKER_THREADS` overrides the
/// count, as tokio's own default does.
pub fn build() -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all();
    if std::env::var_os("TOKIO_WORKER_THREADS").is_none() {
        let processors = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        builder.worker_threads(workers(processors));
    }
    builder.build()
}

/// The workers for `processors` processors: all but one, at least one.
fn workers(processors: usize) -> usize {
    processors.saturating_sub(1).max(1)
}

#[cfg(test)]
mod tests {
    use super::workers;

    #[test]
    fn one_processor_is_left_to_the_store_thread_but_one_worker_always_runs() {
        assert_eq!(workers(1), 1);
        assert_eq!(workers(2), 1);
        assert_eq!(workers(8), 7);
    }
}
