//! Which functions a CEL expression may call: those of the engine the
//! runtime evaluates with (CEL's standard library and the string
//! extension, `opcode_stdlib::cel::env`), asked of that engine itself, so
//! the check never refuses a function that works. The `cel` crate lists no
//! names, so a name is probed once: called bare and on a receiver, an
//! unknown one is an undeclared reference both ways.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use cel::{Context, Env, ExecutionError};

/// The engine's environment: what `opcode_stdlib::cel::env` builds (a
/// stdlib test keeps the two the same).
pub fn env() -> Env {
    let mut env = Env::stdlib();
    // The extension's names are fixed and do not clash with the stdlib.
    let _ = env.add_extension(cel::extensions::strings);
    env
}

/// Is `name` a function the engine knows (globally or as a method)?
pub fn known(name: &str) -> bool {
    static ENGINE: OnceLock<Arc<Env>> = OnceLock::new();
    static SEEN: OnceLock<Mutex<HashMap<String, bool>>> = OnceLock::new();
    let seen = SEEN.get_or_init(Mutex::default);
    if let Some(&known) = seen
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(name)
    {
        return known;
    }
    let known = known_in(ENGINE.get_or_init(|| Arc::new(env())), name);
    let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
    // Names come from what agents write: the memo starts over rather than
    // grow with every name ever seen.
    if seen.len() >= NAMES_KEPT {
        seen.clear();
    }
    seen.insert(name.to_owned(), known);
    known
}

/// Function names whose answer [`known`] keeps at most.
const NAMES_KEPT: usize = 4096;

/// Does `engine` know `name`? Called bare and on a receiver, an unknown
/// name is an undeclared reference both ways; a known one fails otherwise
/// (no overload for no arguments) or works.
pub fn known_in(engine: &Arc<Env>, name: &str) -> bool {
    let undeclared = |call: String| {
        let Ok(program) = engine.compile(&call) else {
            return false;
        };
        let context = Context::with_env(engine.clone());
        matches!(
            program.execute(&context),
            Err(ExecutionError::UndeclaredReference(_))
        )
    };
    !(undeclared(format!("{name}()")) && undeclared(format!("null.{name}()")))
}

/// What people write for a CEL function, by the spelling they bring from
/// elsewhere: (theirs, CEL's, whether CEL's is called the same way, so a
/// rename is the whole fix).
pub const OTHER_SPELLINGS: &[(&str, &str, bool)] = &[
    ("len", "size", true),
    ("length", "size", true),
    ("count", "size", true),
    ("upper", "upperAscii", false),
    ("lower", "lowerAscii", false),
    ("toUpperCase", "upperAscii", true),
    ("toLowerCase", "lowerAscii", true),
    ("not", "!", false),
    ("str", "string", true),
    ("toString", "string", false),
    ("any", "exists", true),
    ("every", "all", true),
    ("includes", "contains", true),
    ("starts_with", "startsWith", true),
    ("ends_with", "endsWith", true),
    ("regex", "matches", true),
];

/// CEL's macros: expanded by the parser, so never called by name.
pub const MACROS: &[&str] = &["has", "all", "exists", "exists_one", "map", "filter"];

/// Standard CEL functions this engine is built without (the `cel` crate's
/// time types need its `chrono` feature): refused with their own reason.
pub const UNAVAILABLE: &[&str] = &[
    "timestamp",
    "duration",
    "getFullYear",
    "getMonth",
    "getDate",
    "getDayOfMonth",
    "getDayOfWeek",
    "getDayOfYear",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
];

/// Names to suggest for a misspelling: the standard functions and macros
/// and the string extension's.
pub const SUGGESTIONS: &[&str] = &[
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "matches",
    "has",
    "all",
    "exists",
    "exists_one",
    "map",
    "filter",
    "int",
    "uint",
    "double",
    "string",
    "bytes",
    "bool",
    "type",
    "dyn",
    "max",
    "min",
    "upperAscii",
    "lowerAscii",
    "trim",
    "substring",
    "split",
    "join",
    "replace",
    "indexOf",
    "lastIndexOf",
    "charAt",
    "format",
    "quote",
    "reverse",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_says_which_functions_exist() {
        for name in [
            "size",
            "contains",
            "startsWith",
            "upperAscii",
            "split",
            "int",
            "matches",
        ] {
            assert!(known(name), "{name}");
        }
        for name in ["len", "upper", "not", "exsts", "toUpperCase"] {
            assert!(!known(name), "{name}");
        }
    }
}
