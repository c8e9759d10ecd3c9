//! CEL sources evaluated by `expr.eval` (issue 24, item 3): each source is
//! compiled once per process and kept, with what it reads of each
//! variable ([`Need`]), so that an evaluation converts only that.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::reads::{self, Need};

/// The most sources kept; past it the cache starts again empty.
const KEPT: usize = 1024;

/// The variables an `expr.eval` expression may read, in binding order.
pub const VARIABLES: [&str; 6] = ["inputs", "steps", "workflow", "context", "iter", "data"];

/// A compiled source and what it reads.
pub struct Source {
    /// The program.
    pub program: cel::Program,
    /// What it reads of each of [`VARIABLES`] (`None`: nothing).
    pub needs: [Option<Need>; VARIABLES.len()],
}

type Cache = Mutex<Option<HashMap<String, Arc<Source>>>>;

static CACHE: Cache = Mutex::new(None);

/// `source` compiled earlier, if it was.
pub fn cached(source: &str) -> Option<Arc<Source>> {
    CACHE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .and_then(|cache| cache.get(source))
        .cloned()
}

/// `source` compiled, with what it reads, and kept for later calls.
pub fn compile(source: &str) -> Result<Arc<Source>, String> {
    let env = super::env();
    let program = super::guarded(|| env.compile(source).map_err(|e| e.to_string()))??;
    let needs = reads::of(program.expression(), VARIABLES);
    let made = Arc::new(Source { program, needs });
    let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    let cache = cache.get_or_insert_with(HashMap::new);
    if cache.len() >= KEPT {
        cache.clear();
    }
    cache.insert(source.to_owned(), made.clone());
    Ok(made)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_is_compiled_once() {
        assert!(cached("1 + 2").is_none());
        let first = compile("1 + 2").unwrap();
        let again = cached("1 + 2").unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(first.needs, [const { None }; VARIABLES.len()]);
        assert!(compile("1 +").is_err());
        assert!(cached("1 +").is_none());
    }
}
