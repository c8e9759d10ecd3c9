//! The bounds every crate holds expressions to (spec/limits.md): a CEL
//! expression or a jq filter too large, or nested too deep for its parser
//! and evaluator to stay within a thread's stack, is refused before any
//! parser sees it — by the compiler (E0053) and, for text made at run time,
//! by the runtime (R0130).
//!
//! Nesting is measured on the text, without parsing: brackets, plus every
//! operator chained at the same level (a parser builds `1+1+…+1` as a tree
//! as deep as it has operators). It is an upper bound of the syntax tree's
//! depth, so a text within it cannot overflow the stack however the parser
//! builds its tree.

use serde_json::Value;

/// The fewest model steps a delegated agent's budget may give (the last
/// 20%, at least two, are kept for its report; spec/agents.md).
pub const AGENT_MIN_STEPS: i64 = 4;
/// The most model steps a delegated agent's budget may give.
pub const AGENT_MAX_STEPS: i64 = 256;
/// The shortest wall-clock budget of a delegated agent, in milliseconds.
pub const AGENT_MIN_TIMEOUT_MS: u64 = 10_000;

/// The budget of an `agent.*` action whose step gives none: (model steps,
/// timeout in milliseconds); `None` for another action.
pub fn agent_defaults(action: &str) -> Option<(i64, u64)> {
    match action {
        "agent.scout" => Some((16, 300_000)),
        "agent.worker" => Some((32, 600_000)),
        "agent.runner" => Some((40, 1_200_000)),
        _ => None,
    }
}

/// Largest CEL expression, in bytes.
pub const CEL_BYTES: usize = 16 * 1024;
/// Deepest CEL nesting (the `cel` crate's parser and evaluator overflow a
/// 2 MiB stack past about 1,500).
pub const CEL_NESTING: usize = 200;
/// Largest jq filter, in bytes.
pub const JQ_BYTES: usize = 64 * 1024;
/// Deepest jq nesting (jaq overflows a 2 MiB stack past about 200).
pub const JQ_NESTING: usize = 100;
/// Largest Expr expression (`expr.eval` with `language: expr`), in bytes.
pub const EXPR_BYTES: usize = 16 * 1024;
/// Deepest Expr nesting (expr-lang's parser overflows a 2 MiB stack past
/// about 250 in a debug build; its evaluator runs on a stack of its own).
pub const EXPR_NESTING: usize = 100;
/// Largest regular expression, in bytes.
pub const REGEX_BYTES: usize = 64 * 1024;
/// Deepest regular expression nesting.
pub const REGEX_NESTING: u32 = 128;

/// Iterations one loop instance may make unless the run says
/// ([`crate::event::RunMeta::max_loop_iterations`]).
pub const LOOP_ITERATIONS: u64 = 100_000;

/// Step instances the loops of one run may make in all, however they
/// nest, unless the run says ([`crate::event::RunMeta::max_step_instances`]):
/// a loop at [`LOOP_ITERATIONS`] with a one-step body fits.
pub const STEP_INSTANCES: u64 = 100_000;

/// A run's priority unless it says ([`crate::event::RunMeta::priority`]):
/// the middle of 0 (first) to [`PRIORITY_LAST`].
pub const PRIORITY: u8 = 5;
/// The last priority: 9.
pub const PRIORITY_LAST: u8 = 9;

/// Bytes of JSON the action outputs of one run may add up to, unless the
/// run says ([`crate::event::RunMeta::max_output_bytes`]): what its log and
/// its state hold of them.
pub const RUN_OUTPUT_BYTES: u64 = 256 << 20;

/// About how many bytes `value` takes as JSON (strings unescaped), without
/// writing it out; stops counting past `stop`.
pub fn json_bytes(value: &Value, stop: u64) -> u64 {
    let mut total = 0u64;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        total = total.saturating_add(match value {
            Value::String(s) => s.len() as u64 + 2,
            Value::Array(items) => {
                stack.extend(items);
                2 + items.len() as u64
            }
            Value::Object(map) => {
                for (key, item) in map {
                    total = total.saturating_add(key.len() as u64 + 4);
                    stack.push(item);
                }
                2
            }
            Value::Number(_) => 8,
            Value::Bool(_) | Value::Null => 5,
        });
        if total > stop {
            break;
        }
    }
    total
}

/// R0130 for a run-time bound: `limit` names it, `value` is what was
/// asked, `max` the bound.
pub fn exceeded(limit: &str, value: u64, max: u64, message: String) -> crate::error::ActionError {
    crate::error::ActionError::new(crate::codes::R0130, "LIMIT_EXCEEDED", message, false)
        .with_details(serde_json::json!({"limit": limit, "value": value, "max": max}))
}

/// Why an expression is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TooComplex {
    /// Longer than `limit` bytes.
    Size {
        /// Its size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// Nested deeper than `limit`, first at byte `at`.
    Nesting {
        /// Its nesting.
        depth: usize,
        /// The limit.
        limit: usize,
        /// Where it first goes past the limit.
        at: usize,
    },
}

impl std::fmt::Display for TooComplex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TooComplex::Size { bytes, limit } => {
                write!(f, "is {bytes} bytes long; at most {limit} are allowed")
            }
            TooComplex::Nesting { depth, limit, .. } => write!(
                f,
                "nests {depth} deep (brackets and chained operators); at most {limit} is allowed"
            ),
        }
    }
}

/// Checks a CEL expression against [`CEL_BYTES`] and [`CEL_NESTING`].
pub fn check_cel(source: &str) -> Result<(), TooComplex> {
    check(source, CEL_BYTES, CEL_NESTING, &CEL)
}

/// Checks a regular expression against [`REGEX_BYTES`] and
/// [`REGEX_NESTING`] (groups, counted outside character classes).
pub fn check_regex(pattern: &str) -> Result<(), TooComplex> {
    if pattern.len() > REGEX_BYTES {
        return Err(TooComplex::Size {
            bytes: pattern.len(),
            limit: REGEX_BYTES,
        });
    }
    let limit = REGEX_NESTING as usize;
    let (mut depth, mut in_class, mut escaped) = (0usize, false, false);
    for (at, c) in pattern.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '[' => in_class = true,
            ']' => in_class = false,
            '(' if !in_class => {
                depth += 1;
                if depth > limit {
                    return Err(TooComplex::Nesting { depth, limit, at });
                }
            }
            ')' if !in_class => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

/// Checks a jq filter against [`JQ_BYTES`] and [`JQ_NESTING`].
pub fn check_jq(source: &str) -> Result<(), TooComplex> {
    check(source, JQ_BYTES, JQ_NESTING, &JQ)
}

/// Checks an Expr expression against [`EXPR_BYTES`] and [`EXPR_NESTING`].
pub fn check_expr(source: &str) -> Result<(), TooComplex> {
    check(source, EXPR_BYTES, EXPR_NESTING, &EXPR)
}

/// How a language's text is scanned.
struct Syntax {
    /// Comma separates arguments (CEL) or is an operator (jq).
    comma_is_operator: bool,
    /// `#` starts a comment to the end of the line (jq).
    hash_comments: bool,
    /// `\(` inside a string opens an interpolated filter; `if … end`
    /// encloses like brackets (jq).
    jq: bool,
    /// The characters that open a string (a backquote's is raw: Expr).
    quotes: &'static [u8],
    /// Words that chain like operators.
    operators: &'static [&'static str],
}

const CEL: Syntax = Syntax {
    comma_is_operator: false,
    hash_comments: false,
    jq: false,
    quotes: b"\"'",
    operators: &["in"],
};

const EXPR: Syntax = Syntax {
    comma_is_operator: false,
    hash_comments: false,
    jq: false,
    quotes: b"\"'`",
    operators: crate::expr_lang::WORD_OPERATORS,
};

const JQ: Syntax = Syntax {
    comma_is_operator: true,
    hash_comments: true,
    jq: true,
    quotes: b"\"'",
    operators: &["reduce", "foreach", "def", "try", "label", "and", "or"],
};

/// What opened a level.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Opener {
    /// `(`, `[` or `{`.
    Bracket,
    /// `\(` inside a string: closing it goes back into the string.
    Interpolation,
    /// jq's `if`, closed by `end`.
    If,
}

/// One open level: what opened it, and the operators chained in it.
struct Level {
    opener: Opener,
    chained: usize,
    /// jq's `elif`s: each nests the rest of the `if`.
    elifs: usize,
}

impl Level {
    fn new(opener: Opener) -> Level {
        Level {
            opener,
            chained: 0,
            elifs: 0,
        }
    }
}

/// The syntax tree's depth at most: open levels, plus what each chains.
fn depth_of(levels: &[Level]) -> usize {
    levels.len() - 1 + levels.iter().map(|l| l.chained + l.elifs).sum::<usize>()
}

fn check(source: &str, bytes: usize, limit: usize, syntax: &Syntax) -> Result<(), TooComplex> {
    if source.len() > bytes {
        return Err(TooComplex::Size {
            bytes: source.len(),
            limit: bytes,
        });
    }
    let text = source.as_bytes();
    let mut levels = vec![Level::new(Opener::Bracket)];
    let mut i = 0;
    let mut in_string: Option<u8> = None;
    while i < text.len() {
        let c = text[i];
        let at = i;
        if let Some(quote) = in_string {
            match c {
                b'\\' if syntax.jq && text.get(i + 1) == Some(&b'(') => {
                    levels.push(Level::new(Opener::Interpolation));
                    in_string = None;
                    i += 1;
                }
                b'\\' if quote != b'`' => i += 1,
                _ if c == quote => in_string = None,
                _ => {}
            }
            i += 1;
        } else if c.is_ascii_alphabetic() || c == b'_' {
            while i < text.len() && (text[i].is_ascii_alphanumeric() || text[i] == b'_') {
                i += 1;
            }
            word(&source[at..i], syntax, &mut levels);
        } else {
            match c {
                _ if syntax.quotes.contains(&c) => in_string = Some(c),
                b'#' if syntax.hash_comments => {
                    while i < text.len() && text[i] != b'\n' {
                        i += 1;
                    }
                }
                b'(' | b'[' | b'{' => levels.push(Level::new(Opener::Bracket)),
                b')' | b']' | b'}' => {
                    if levels.len() > 1
                        && let Some(level) = levels.pop()
                        && level.opener == Opener::Interpolation
                    {
                        in_string = Some(b'"');
                    }
                }
                b',' if !syntax.comma_is_operator => reset(&mut levels),
                b';' => reset(&mut levels),
                _ if is_operator(c) || c == b'.' || c == b',' => {
                    // A two-character operator (`&&`, `==`, `//`, `|=`) counts once.
                    let part_of_previous = at > 0 && is_operator(text[at - 1]);
                    if !part_of_previous && let Some(level) = levels.last_mut() {
                        level.chained += 1;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        let depth = depth_of(&levels);
        if depth > limit {
            return Err(TooComplex::Nesting { depth, limit, at });
        }
    }
    Ok(())
}

/// A word: a keyword that opens, closes or chains, or a name.
fn word(word: &str, syntax: &Syntax, levels: &mut Vec<Level>) {
    let top = levels.len() - 1;
    match word {
        "if" if syntax.jq => levels.push(Level::new(Opener::If)),
        "end" if syntax.jq && levels.len() > 1 && levels[top].opener == Opener::If => {
            levels.pop();
        }
        "then" | "else" if syntax.jq => levels[top].chained = 0,
        "elif" if syntax.jq => {
            levels[top].elifs += 1;
            levels[top].chained = 0;
        }
        _ if syntax.operators.contains(&word) => levels[top].chained += 1,
        _ => {}
    }
}

/// A separator: what follows starts a new operand.
fn reset(levels: &mut [Level]) {
    if let Some(level) = levels.last_mut() {
        level.chained = 0;
    }
}

fn is_operator(c: u8) -> bool {
    matches!(
        c,
        b'+' | b'-' | b'*' | b'/' | b'%' | b'<' | b'>' | b'=' | b'!' | b'&' | b'|' | b'?' | b':'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(term: &str, op: &str, n: usize) -> String {
        vec![term; n].join(op)
    }

    #[test]
    fn ordinary_expressions_pass() {
        for cel in [
            "steps.fetch.output.status == 200 && size(inputs.items) > 0",
            "inputs.tags.exists(t, t == 'urgent') ? 'high' : 'low'",
            "'a, (b' + \"c)\" == inputs.x",
            &chain("inputs.x == 1", " || ", 40),
        ] {
            assert_eq!(check_cel(cel), Ok(()), "{cel}");
        }
        for jq in [
            "[.users[] | select(.on) | .name] | sort",
            "reduce .[] as $x (0; . + $x) # a comment with ((((",
            "\"\\(.a) and \\(.b | tostring)\"",
            "def f: if . > 0 then . - 1 | f else . end; f",
            &chain(".", " | ", 50),
        ] {
            assert_eq!(check_jq(jq), Ok(()), "{jq}");
        }
        for expr in [
            "filter(steps['fetch-data'].body.items, {.score >= inputs.threshold})",
            "let x = 1; x > 0 ? `raw (` : 'b'",
        ] {
            assert_eq!(check_expr(expr), Ok(()), "{expr}");
        }
    }

    #[test]
    fn deep_or_large_ones_are_refused() {
        let plus = chain("1", "+", CEL_NESTING + 2);
        assert!(matches!(check_cel(&plus), Err(TooComplex::Nesting { .. })));
        let parens = "(".repeat(CEL_NESTING + 1) + "1" + &")".repeat(CEL_NESTING + 1);
        assert!(matches!(
            check_cel(&parens),
            Err(TooComplex::Nesting { .. })
        ));
        assert!(matches!(
            check_cel(&"1".repeat(CEL_BYTES + 1)),
            Err(TooComplex::Size { .. })
        ));
        let ternaries = "true ? 1 : ".repeat(EXPR_NESTING) + "1";
        assert!(check_expr(&ternaries).is_err());
        let hidden = "`)))` + ".to_owned() + &"(".repeat(EXPR_NESTING + 1);
        assert!(check_expr(&hidden).is_err());
        let pipes = chain(".", "|", JQ_NESTING + 2);
        assert!(matches!(check_jq(&pipes), Err(TooComplex::Nesting { .. })));
        let array = format!("[{}]", chain("1", ",", JQ_NESTING + 2));
        assert!(matches!(check_jq(&array), Err(TooComplex::Nesting { .. })));
        let nested_ifs = "if . then ".repeat(JQ_NESTING) + "." + &" else . end".repeat(JQ_NESTING);
        assert!(check_jq(&nested_ifs).is_err());
        let interpolated = "\"\\(".repeat(JQ_NESTING + 1) + "." + &")\"".repeat(JQ_NESTING + 1);
        assert!(check_jq(&interpolated).is_err());
    }
}
