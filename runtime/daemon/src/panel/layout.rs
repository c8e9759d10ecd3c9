//! The page shell and the small pieces every page uses.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};
use serde_json::Value;

use super::{Fields, Panel};

/// The sections of the navigation bar.
const NAV: [(&str, &str); 11] = [
    ("/", "Dashboard"),
    ("/workflows", "Workflows"),
    ("/templates", "Templates"),
    ("/decisions", "Decisions"),
    ("/scheduler", "Scheduler"),
    ("/triggers", "Triggers"),
    ("/events", "Events"),
    ("/agents", "Agents"),
    ("/registry", "Registry"),
    ("/plugins", "Plugins"),
    ("/secrets", "Secrets"),
];

/// A full page: `active` is the navigation entry's path; `scope` (a
/// workflow id) limits live refreshes to that workflow's changes.
pub(crate) fn page(
    panel: &Panel,
    title: &str,
    active: &str,
    query: &Fields,
    scope: Option<&str>,
    body: &Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="csrf-token" content=(panel.csrf);
                title { (title) " · opcode" }
                link rel="icon" href="data:,";
                link rel="stylesheet" href="/static/panel.css";
                script src="/static/panel.js" defer {}
            }
            body data-scope=[scope] data-zone=(panel.clock.zone_name()) {
                header {
                    a.brand href="/" { "opcode" }
                    nav {
                        @for (href, label) in NAV {
                            a href=(href) aria-current=[(href == active).then_some("page")] { (label) }
                        }
                    }
                    (super::clock::toggle(&panel.clock, &panel.here))
                    span.live-state title="Live updates" {}
                }
                main {
                    h1 { (title) }
                    @if let Some(error) = query.get("error") {
                        p.flash.error role="alert" { (error) }
                    }
                    @if let Some(notice) = query.get("notice") {
                        p.flash.notice role="status" { (notice) }
                    }
                    (body)
                }
            }
        }
    }
}

/// A 404 page saying `what` does not exist.
pub(crate) fn not_found(panel: &Panel, active: &str, query: &Fields, what: &str) -> Response {
    let body = empty(&format!("There is no {what}."));
    let page = page(panel, "Not found", active, query, None, &body);
    (StatusCode::NOT_FOUND, page).into_response()
}

/// The hidden CSRF field every form carries.
pub(crate) fn csrf(panel: &Panel) -> Markup {
    html! { input type="hidden" name="csrf" value=(panel.csrf); }
}

/// A status as a coloured badge.
pub(crate) fn status(status: &str) -> Markup {
    html! { span class={"badge " (status)} { (status) } }
}

/// JSON text, pretty-printed in a block (as it is when it does not parse).
pub(crate) fn json_text(text: &str) -> Markup {
    let pretty = serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| text.to_owned());
    html! { pre.json { (pretty) } }
}

/// What a decision's timeout does (`done`: it did): takes the fallback
/// option, or fails its step.
pub(crate) fn on_timeout(fallback: Option<&str>, done: bool) -> Markup {
    match (fallback, done) {
        (Some(option), false) => html! { "takes " code { (option) } },
        (Some(option), true) => html! { "took " code { (option) } },
        (None, false) => html! { "fails its step (no fallback)" },
        (None, true) => html! { "failed its step (no fallback)" },
    }
}

/// A JSON value, pretty-printed in a block.
pub(crate) fn json_value(value: &Value) -> Markup {
    html! { pre.json { (serde_json::to_string_pretty(value).unwrap_or_default()) } }
}

pub(crate) use super::url::encode;

/// Ids longer than this show shortened.
const SHORT_ID: usize = 12;

/// An id as people scan it: shortened (the whole id on hover)
/// and a button that copies it whole (shown by the script).
pub(crate) fn short_id(id: &str) -> Markup {
    html! {
        span.id title=(id) { (shorten(id)) }
        " " button.copy type="button" data-copy=(id) title="Copy the id" aria-label={"Copy " (id)} hidden { "copy" }
    }
}

/// A link to a workflow's page, by its short id.
pub(crate) fn workflow_link(id: &str) -> Markup {
    html! { a.id href={"/workflows/" (encode(id))} title=(id) { (shorten(id)) } }
}

/// `id` shortened as [`short_id`] shows it: a UUID by its last eight
/// digits (the first ones of a v7 UUID are its time, shared by the runs of
/// a minute), another long id by its first characters.
fn shorten(id: &str) -> String {
    if uuid::Uuid::parse_str(id).is_ok() {
        format!("…{}", &id[id.len() - 8..])
    } else if id.chars().count() > SHORT_ID {
        let short: String = id.chars().take(SHORT_ID - 4).collect();
        format!("{short}…")
    } else {
        id.to_owned()
    }
}

/// An SVG diagram (base64, from `opcode.diagram`) as an image.
pub(crate) fn diagram(result: &Value) -> Markup {
    if let Some(data) = result.get("image").and_then(Value::as_str) {
        html! {
            figure.diagram {
                img src={"data:image/svg+xml;base64," (data)} alt="Workflow diagram";
            }
        }
    } else {
        html! { p.muted { "No diagram." } }
    }
}

/// An empty state's sentence; what it quotes between backticks (a
/// command, a setting) is shown as code.
pub(crate) fn empty(text: &str) -> Markup {
    html! {
        p.empty {
            @for (i, part) in text.split('`').enumerate() {
                @if i % 2 == 1 { code { (part) } } @else { (part) }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::empty;

    #[test]
    fn an_empty_state_shows_what_it_quotes_as_code() {
        let page = empty("Nothing yet: `opcode agent init <NAME>`, then `publish`.").into_string();
        assert_eq!(
            page,
            "<p class=\"empty\">Nothing yet: <code>opcode agent init &lt;NAME&gt;</code>, then <code>publish</code>.</p>"
        );
        assert!(!page.contains('`'));
    }
}
