//! Stable error codes.
//!
//! A [`Code`] names one kind of problem for ever: `E0001` (compile error),
//! `W0001` (compile warning) or `R0001` (run-time error). Each code has a page
//! in `spec/errors/<CODE>.md` whose text is embedded in the binary, so
//! `opcodec explain CODE` works offline. The compiler's registry lives in
//! `opcode-compiler`; the run-time registry is [`RUNTIME`] below, because the
//! VM must not depend on the compiler.

use std::fmt;

/// One stable, documented error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Code {
    /// The code itself, such as `E0001`.
    pub id: &'static str,
    /// A short kebab-case name, such as `invalid-json`.
    pub name: &'static str,
    /// The page from `spec/errors/<id>.md`.
    pub doc: &'static str,
}

impl Code {
    /// The one-line summary: the page's first heading without the code prefix.
    pub fn summary(&self) -> &'static str {
        let first = self.doc.lines().next().unwrap_or_default();
        let heading = first.trim_start_matches('#').trim();
        heading
            .split_once(':')
            .map_or(heading, |(_, rest)| rest.trim())
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id)
    }
}

/// Declares a registry of codes: one `pub const` per code plus a slice of all.
///
/// The page is read from `spec/errors/<id>.md`, relative to the crate using
/// the macro, so the path is given by the caller.
#[macro_export]
macro_rules! code_registry {
    ($all:ident, $dir:literal; $($(#[$meta:meta])* $id:ident = $name:literal,)*) => {
        $(
            $(#[$meta])*
            pub const $id: $crate::Code = $crate::Code {
                id: stringify!($id),
                name: $name,
                doc: include_str!(concat!($dir, stringify!($id), ".md")),
            };
        )*
        /// Every code of this registry, in declaration order.
        pub const $all: &[$crate::Code] = &[$($id),*];
    };
}

code_registry! { RUNTIME, "../../spec/errors/";
}

/// Finds a run-time code by its id.
pub fn lookup(id: &str) -> Option<Code> {
    RUNTIME
        .iter()
        .copied()
        .find(|code| code.id.eq_ignore_ascii_case(id))
}
