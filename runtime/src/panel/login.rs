//! Signing a browser in when the daemon has a token: the token is checked
//! and kept in an `HttpOnly`, `SameSite=Strict` cookie the guard accepts.

use std::sync::PoisonError;

use axum::Form;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};

use super::layout;
use super::{Fields, Panel};
use crate::serve::guard::{TOKEN_COOKIE, same};

/// `GET /login`.
pub async fn page(State(panel): State<Panel>, Query(query): Query<Fields>) -> Response {
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
pub async fn submit(State(panel): State<Panel>, Form(fields): Form<Fields>) -> Response {
    let token = panel
        .guard
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .token
        .clone();
    let given = fields.get("token").map_or("", String::as_str);
    match token {
        None => Redirect::to("/").into_response(),
        Some(token) if same(given.as_bytes(), token.as_bytes()) => {
            let cookie = format!("{TOKEN_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict");
            ([(header::SET_COOKIE, cookie)], Redirect::to("/")).into_response()
        }
        Some(_) => {
            let query = Fields::from([("error".to_owned(), "wrong token".to_owned())]);
            let page = layout::page(&panel, "Sign in", "", &query, None, &form());
            (StatusCode::UNAUTHORIZED, page).into_response()
        }
    }
}
