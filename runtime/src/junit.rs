//! JUnit XML, as CI systems read test reports: `opcodec test --junit` and
//! `opcode agent test --junit`.

use std::fmt::Write as _;

use opcode_compiler::diagram::svg::xml as escape;

/// One suite: a test file or an agent's eval suite.
#[derive(Debug, Clone, PartialEq)]
pub struct Suite {
    /// Its name (a path, `name@version`).
    pub name: String,
    /// Why none of its cases ran, when none could.
    pub error: Option<String>,
    /// Its cases, in order.
    pub cases: Vec<Case>,
}

/// One case.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// Its name.
    pub name: String,
    /// Why it failed; empty when it passed.
    pub failures: Vec<String>,
    /// Wall-clock seconds it took.
    pub seconds: f64,
}

/// `suites` as a JUnit `<testsuites>` document.
pub fn render(suites: &[Suite]) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n");
    for suite in suites {
        let name = escape(&suite.name);
        let failed = suite
            .cases
            .iter()
            .filter(|c| !c.failures.is_empty())
            .count()
            + usize::from(suite.error.is_some());
        let _ = writeln!(
            out,
            "  <testsuite name=\"{name}\" tests=\"{}\" failures=\"{failed}\">",
            suite.cases.len() + usize::from(suite.error.is_some())
        );
        if let Some(error) = &suite.error {
            let _ = writeln!(
                out,
                "    <testcase name=\"(file)\" classname=\"{name}\"><failure message=\"{}\"/></testcase>",
                escape(error)
            );
        }
        for case in &suite.cases {
            let _ = write!(
                out,
                "    <testcase name=\"{}\" classname=\"{name}\" time=\"{:.3}\">",
                escape(&case.name),
                case.seconds
            );
            if let Some(first) = case.failures.first() {
                let _ = write!(
                    out,
                    "<failure message=\"{}\">{}</failure>",
                    escape(first),
                    escape(&case.failures.join("\n"))
                );
            }
            out.push_str("</testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_and_unreadable_suites_are_counted_and_escaped() {
        let xml = render(&[Suite {
            name: "db@1.0.0".into(),
            error: None,
            cases: vec![
                Case {
                    name: "a <b>".into(),
                    failures: vec!["said \"x\" & \u{1b}y".into()],
                    seconds: 1.5,
                },
                Case {
                    name: "ok".into(),
                    failures: Vec::new(),
                    seconds: 0.25,
                },
            ],
        }]);
        assert!(xml.contains("<testsuite name=\"db@1.0.0\" tests=\"2\" failures=\"1\">"));
        assert!(xml.contains("name=\"a &lt;b&gt;\""));
        assert!(xml.contains("message=\"said &quot;x&quot; &amp; y\""));
        assert!(
            xml.contains("<testcase name=\"ok\" classname=\"db@1.0.0\" time=\"0.250\"></testcase>")
        );
        assert_eq!(
            xml.matches("<testcase ").count(),
            xml.matches("</testcase>").count()
        );
    }
}
