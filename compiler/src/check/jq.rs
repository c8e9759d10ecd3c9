//! jq filters (the `json.jq` action): parsed and compiled with jaq at compile
//! time, so a typo or an undefined function is reported before any run.

use std::ops::Range;

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, data::JustLut};
use jaq_json::Val;

/// Parses and compiles `code`; on failure, the message and its byte range in `code`.
pub fn check(code: &str) -> Result<(), (String, Range<usize>)> {
    let arena = Arena::default();
    let defs = jaq_core::defs()
        .chain(jaq_std::defs())
        .chain(jaq_json::defs());
    let loader = Loader::new(defs);
    let offset = |slice: &str| -> Range<usize> {
        let start = (slice.as_ptr() as usize).saturating_sub(code.as_ptr() as usize);
        let start = start.min(code.len());
        start..(start + slice.len()).min(code.len()).max(start)
    };
    let modules = match loader.load(&arena, File { code, path: () }) {
        Ok(modules) => modules,
        Err(errors) => {
            let Some((_, error)) = errors.into_iter().next() else {
                return Err(("invalid jq filter".into(), 0..code.len()));
            };
            return Err(match error {
                jaq_core::load::Error::Lex(errs) => errs.first().map_or_else(
                    || ("invalid jq filter".into(), 0..code.len()),
                    |(expect, found)| (format!("expected {}", lex_expect(expect)), offset(found)),
                ),
                jaq_core::load::Error::Parse(errs) => errs.first().map_or_else(
                    || ("invalid jq filter".into(), 0..code.len()),
                    |(expect, found)| {
                        let found_text = if found.is_empty() {
                            "end of filter".to_owned()
                        } else {
                            format!("`{found}`")
                        };
                        (
                            format!("expected {}, found {found_text}", expect.as_str()),
                            offset(found),
                        )
                    },
                ),
                jaq_core::load::Error::Io(_) => {
                    ("jq modules cannot be imported here".into(), 0..code.len())
                }
            });
        }
    };
    let funs = jaq_core::funs()
        .chain(jaq_std::funs())
        .chain(jaq_json::funs());
    let compiler: Compiler<&str, JustLut<Val>> = Compiler::default().with_funs(funs);
    compiler.compile(modules).map(|_| ()).map_err(|errors| {
        errors
            .into_iter()
            .flat_map(|(_, errs)| errs)
            .next()
            .map_or_else(
                || ("invalid jq filter".into(), 0..code.len()),
                |(name, undefined)| {
                    (
                        format!("undefined {} `{name}`", undefined_kind(&undefined)),
                        offset(name),
                    )
                },
            )
    })
}

fn lex_expect(expect: &jaq_core::load::lex::Expect<&str>) -> &'static str {
    use jaq_core::load::lex::Expect;
    match expect {
        Expect::Digit => "a digit",
        Expect::Ident => "an identifier",
        Expect::Delim("(") => "a closing parenthesis",
        Expect::Delim("[") => "a closing bracket",
        Expect::Delim("{") => "a closing brace",
        Expect::Delim("\"") => "a closing quote",
        Expect::Escape => "a string escape sequence",
        Expect::Unicode => "a 4-digit hexadecimal code point",
        _ => "a token",
    }
}

fn undefined_kind(undefined: &jaq_core::compile::Undefined) -> &'static str {
    use jaq_core::compile::Undefined;
    match undefined {
        Undefined::Var => "variable",
        Undefined::Mod => "module",
        Undefined::Label => "label",
        _ => "filter",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_valid_filters() {
        assert!(check(".items | map(select(.score > 1)) | length").is_ok());
        assert!(check("[.[] | {name, id: .id}]").is_ok());
    }

    #[test]
    fn reports_syntax_errors_with_positions() {
        let (message, range) = check(".a | map(.b").unwrap_err();
        assert!(message.contains("closing parenthesis"), "{message}");
        assert!(range.start <= 11);
    }

    #[test]
    fn reports_undefined_functions() {
        let (message, range) = check(".a | frobnicate").unwrap_err();
        assert_eq!(message, "undefined filter `frobnicate`");
        assert_eq!(range, 5..15);
    }
}
