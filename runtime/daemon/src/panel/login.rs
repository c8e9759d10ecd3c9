//! Signing a browser in when the daemon has a token: the token is checked
//! and kept in an `HttpOnly`, `SameSite=Strict` cookie (`Secure` when the
//! public URL is https) the guard accepts. Wrong tokens count against the
//! client like wrong bearer tokens do: after a few, tries are slowed down.

use axum::Form;
use axum::extract::Query;
use axum::http::{StatusCode, header};
use axum::response::{AppendHeaders, IntoResponse, Redirect, Response};
use maud::{Markup, html};

use super::layout;
use super::session::{SESSION_COOKIE, new_id};
use super::{Fields, Panel};
use crate::serve::guard::{Client, TOKEN_COOKIE, too_many};

/// `GET /login`.
pub async fn page(panel: Panel, Query(query): Query<Fields>) -> Response {
    layout::page(&panel, "Sign in", "", &query, None, &form()).into_response()
}

fn form() -> Markup {
    html! {
        form method="post" action="/login" {
            label { "Token " input type="password" name="token" required autofocus; }
            button type="submit" { "Sign in" }
        }
    }
}

/// `POST /login`.
pub async fn submit(panel: Panel, Client(client): Client, Form(fields): Form<Fields>) -> Response {
    if !panel.guard.requires_token() {
        return Redirect::to("/").into_response();
    }
    let metrics = panel.api.metrics().clone();
    if let Some(wait) = panel.guard.throttled(client) {
        return too_many(wait, &metrics);
    }
    let given = fields.get("token").map_or("", String::as_str);
    if panel.guard.accepts(given) {
        panel.guard.right_token(client);
        // A new session at sign-in: an id planted before it is worth nothing after.
        let token = panel.sessions.cookie(TOKEN_COOKIE, given);
        let session = panel.sessions.cookie(SESSION_COOKIE, &new_id());
        let cookies = AppendHeaders([(header::SET_COOKIE, token), (header::SET_COOKIE, session)]);
        return (cookies, Redirect::to("/")).into_response();
    }
    panel.guard.wrong_token(client, "/login", &metrics);
    let query = Fields::from([("error".to_owned(), "wrong token".to_owned())]);
    let page = layout::page(&panel, "Sign in", "", &query, None, &form());
    (StatusCode::UNAUTHORIZED, page).into_response()
}
