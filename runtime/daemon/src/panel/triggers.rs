//! `/triggers`: the stream triggers this daemon reads (spec/triggers-stream.md):
//! each one's topic, what its messages came to, its lag and whether
//! back-pressure holds it, and its last dead letters with their codes.

use axum::extract::Query;
use axum::response::{IntoResponse, Response};
use maud::html;

use super::layout::{self, empty, encode};
use super::{Fields, Panel};
use crate::stream::source::dead_letter_topic;

/// `/triggers`.
pub async fn list(panel: Panel, Query(query): Query<Fields>) -> Response {
    let seen = panel.api.streams().seen();
    let count = |s: &crate::stream::stats::Seen, outcome: &str| {
        s.outcomes.get(outcome).copied().unwrap_or(0)
    };
    let body = html! {
        section #triggers {
            @if seen.is_empty() {
                (empty("This daemon reads no stream: a template's `triggers.stream` names a broker of the settings' `brokers` (spec/triggers-stream.md)."))
            } @else {
                table {
                    thead { tr {
                        th { "Template" } th { "Broker" } th { "Topic" } th { "Started" } th { "Duplicates" }
                        th { "Dead letters" } th { "Not started" } th { "Lag" } th { "Pending" } th { "State" }
                    } }
                    tbody {
                        @for (template, s) in &seen {
                            tr {
                                td { a href={"/templates/" (encode(template))} { (template) } }
                                td { (s.broker) }
                                td { code { (s.topic) } }
                                td { (count(s, "started")) }
                                td { (count(s, "duplicate")) }
                                td { (count(s, "dead_letter")) }
                                td { (count(s, "failed")) }
                                td { (s.lag.map_or("—".to_owned(), |l| l.to_string())) }
                                td { (s.pending) }
                                td {
                                    @if let Some(error) = &s.error { strong { "cannot read: " } (error) }
                                    @else if s.paused { "paused: max_backlog runs not ended" }
                                    @else { "reading" }
                                }
                            }
                        }
                    }
                }
            }
        }
        section #dead-letters {
            h2 { "Dead letters" }
            @let letters: Vec<_> = seen.iter().flat_map(|(t, s)| s.dead.iter().map(move |d| (t, &s.topic, d))).collect();
            @if letters.is_empty() {
                (empty("No message of these topics was dead-lettered."))
            } @else {
                table {
                    thead { tr { th { "Dead letter" } th { "Template" } th { "From" } th { "Code" } th { "Why" } } }
                    tbody {
                        @for (template, topic, letter) in &letters {
                            tr {
                                td { code { (dead_letter_topic(topic)) "#" (letter.at) } }
                                td { (template) }
                                td { code { (topic) "#" (letter.position) } }
                                td { code { (letter.code) } }
                                td { (letter.error) }
                            }
                        }
                    }
                }
            }
        }
    };
    layout::page(&panel, "Stream triggers", "/triggers", &query, None, &body).into_response()
}
