//! Vault secrets: names only; set and delete.

use axum::extract::{Path, Query};
use axum::response::{IntoResponse, Response};
use maud::html;

use super::layout::{self, csrf, empty, encode};
use super::{Fields, Panel, Posted, back, failure};

/// `GET /secrets`.
pub async fn list(panel: Panel, Query(query): Query<Fields>) -> Response {
    let secrets = match opcode_runtime::vault::list(panel.store().as_ref()).await {
        Ok(rows) => rows,
        Err(e) => return failure(&e),
    };
    let open = panel.vault.is_some();
    let body = html! {
        @if !open {
            p.flash.notice {
                "The vault is locked: start the daemon with a passphrase (OPCODE_VAULT_KEY, "
                code { "--vault-key-file" } " or " code { "vault_key_file" } " in settings) to set secrets here."
            }
        }
        section #secret-list data-live {
            @if secrets.is_empty() { (empty("No secret in the vault.")) } @else {
                table {
                    thead { tr { th { "Name" } th { "Use as" } th { "Updated" } th {} } }
                    tbody {
                        @for s in &secrets {
                            tr {
                                td { code { (s.name) } }
                                td { code { "${{secrets." (s.name) "}}" } }
                                td { (panel.clock.time(Some(&s.updated_at))) }
                                td {
                                    form.inline method="post" action={"/secrets/" (encode(&s.name)) "/delete"} {
                                        (csrf(&panel))
                                        button.danger type="submit" { "Delete" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if open {
            section {
                h2 { "Set a secret" }
                form method="post" action="/secrets" autocomplete="off" {
                    (csrf(&panel))
                    label { "Name " input type="text" name="name" required pattern="[A-Za-z_][A-Za-z0-9_.\\-]*"; }
                    label { "Value " input type="password" name="value" required; }
                    button type="submit" { "Save" }
                }
            }
        }
    };
    layout::page(&panel, "Secrets", "/secrets", &query, None, &body).into_response()
}

/// `POST /secrets`.
pub async fn set(panel: Panel, Posted(fields): Posted) -> Response {
    let Some(vault) = &panel.vault else {
        return back("/secrets", Some("the vault is locked".into()));
    };
    let name = fields.get("name").map_or("", |n| n.trim());
    let value = fields.get("value").map_or("", String::as_str);
    match vault.set(name, value).await {
        Ok(()) => back("/secrets?notice=Saved", None),
        Err(e) => back("/secrets", Some(e.to_string())),
    }
}

/// `POST /secrets/{name}/delete`.
pub async fn delete(panel: Panel, Path(name): Path<String>, _: Posted) -> Response {
    let removed = match &panel.vault {
        Some(vault) => vault.remove(&name).await.map_err(|e| e.to_string()),
        None => panel
            .store()
            .delete_secret(&name)
            .await
            .map_err(|e| e.to_string()),
    };
    match removed {
        Ok(true) => back("/secrets?notice=Deleted", None),
        Ok(false) => back("/secrets", Some(format!("no secret `{name}`"))),
        Err(e) => back("/secrets", Some(e)),
    }
}
