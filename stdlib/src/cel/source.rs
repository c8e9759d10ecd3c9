//! CEL sources evaluated by `expr.eval` (issue 24, item 3): each source is
//! compiled once per process and kept, and an evaluation converts only
//! what the expression reads: the namespaces it names, and of `steps` the
//! entries it names literally (all of them when it reads `steps` in
//! another way, such as by a computed key).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::{Map, Value};

/// The most sources kept; past it the cache starts again empty.
const KEPT: usize = 1024;

/// The variables an `expr.eval` expression may read, in binding order.
pub const VARIABLES: [&str; 6] = ["inputs", "steps", "workflow", "context", "iter", "data"];

/// A compiled source and what it reads.
pub struct Source {
    /// The program.
    pub program: cel::Program,
    /// Does it read each of [`VARIABLES`]?
    pub reads: [bool; VARIABLES.len()],
    /// The `steps` entries it names literally (`None`: it may read any).
    pub steps: Option<Vec<String>>,
}

/// `source` compiled (once: later calls get the same), with what it reads.
pub fn compiled(source: &str) -> Result<Arc<Source>, String> {
    static CACHE: Mutex<Option<HashMap<String, Arc<Source>>>> = Mutex::new(None);
    if let Some(kept) = CACHE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .and_then(|cache| cache.get(source))
    {
        return Ok(kept.clone());
    }
    let env = super::env();
    let program = super::guarded(|| env.compile(source).map_err(|e| e.to_string()))??;
    let references = program.references();
    let reads = VARIABLES.map(|name| references.has_variable(name));
    let made = Arc::new(Source {
        program,
        reads,
        steps: literal_steps(source),
    });
    let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    let cache = cache.get_or_insert_with(HashMap::new);
    if cache.len() >= KEPT {
        cache.clear();
    }
    cache.insert(source.to_owned(), made.clone());
    Ok(made)
}

/// The step names `source` reads as `steps.<name>` or `steps['<name>']`,
/// when every use of `steps` in it is one of those (else `None`).
fn literal_steps(source: &str) -> Option<Vec<String>> {
    let mut names = Vec::new();
    let bytes = source.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut at = 0;
    while let Some(found) = source[at..].find("steps") {
        let start = at + found;
        let end = start + "steps".len();
        at = end;
        let alone = (start == 0 || !word(bytes[start - 1]) && bytes[start - 1] != b'.')
            && bytes.get(end).is_none_or(|b| !word(*b));
        if !alone {
            continue;
        }
        let rest = &source[end..];
        let name = if let Some(member) = rest.strip_prefix('.') {
            let len = member.bytes().take_while(|b| word(*b)).count();
            // `steps.all(…)`, `steps.size()`: a call on the whole map.
            let called = member[len..].trim_start().starts_with('(');
            (len > 0 && !called).then(|| member[..len].to_owned())
        } else if let Some(index) = rest.strip_prefix('[') {
            let quote = index.chars().next().filter(|q| *q == '\'' || *q == '"');
            quote.and_then(|q| {
                let inner = &index[1..];
                let close = inner.find(q)?;
                let literal = &inner[..close];
                (inner[close + 1..].starts_with(']') && !literal.contains('\\'))
                    .then(|| literal.to_owned())
            })
        } else {
            None
        };
        names.push(name?);
    }
    Some(names)
}

/// The `steps` namespace narrowed to `names` (all of it when `None`).
pub fn narrowed<'a>(steps: &'a Value, names: Option<&[String]>, keep: &'a mut Value) -> &'a Value {
    let (Some(names), Value::Object(all)) = (names, steps) else {
        return steps;
    };
    let picked: Map<String, Value> = names
        .iter()
        .filter_map(|n| all.get(n).map(|v| (n.clone(), v.clone())))
        .collect();
    *keep = Value::Object(picked);
    keep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_step_reads_are_found_and_any_other_use_of_steps_is_everything() {
        let names = |s: &str| literal_steps(s);
        assert_eq!(names("3"), Some(vec![]));
        assert_eq!(
            names("steps.fetch.output.n + steps['b-c'].x"),
            Some(vec!["fetch".into(), "b-c".into()])
        );
        assert_eq!(names("mysteps.x + inputs.steps"), Some(vec![]));
        assert_eq!(names("steps[inputs.key].x"), None);
        assert_eq!(names("steps.all(k, k != '')"), None);
        assert_eq!(names("steps.size ()"), None);
        assert_eq!(names("size(steps)"), None);
        assert_eq!(names("steps['a' + 'b']"), None);
    }

    #[test]
    fn a_source_is_compiled_once() {
        let first = compiled("1 + 2").unwrap();
        let again = compiled("1 + 2").unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(first.reads, [false; VARIABLES.len()]);
        assert!(compiled("1 +").is_err());
    }
}
