//! `resources/*` over rmcp's types: the [`crate::api`] resources as MCP
//! lists and reads them.

use rmcp::ErrorData;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceContents, ResourceTemplate,
};
use serde_json::json;

use crate::api::{Api, TEMPLATES, ToolError};

/// `resources/list`.
pub async fn list(api: &Api) -> Result<ListResourcesResult, ErrorData> {
    let listed = api.resources().await.map_err(|e| failed(e, ""))?;
    let resources = listed
        .into_iter()
        .map(|r| {
            Resource::new(r.uri, r.name)
                .with_description(r.description)
                .with_mime_type(r.mime_type)
        })
        .collect();
    Ok(ListResourcesResult::with_all_items(resources))
}

/// `resources/templates/list`.
pub fn templates() -> ListResourceTemplatesResult {
    let templates = TEMPLATES
        .iter()
        .map(|(uri, name, description)| {
            ResourceTemplate::new(*uri, *name)
                .with_description(*description)
                .with_mime_type("application/json")
        })
        .collect();
    ListResourceTemplatesResult::with_all_items(templates)
}

/// `resources/read`: the text, and for a range where it sits in the whole.
pub async fn read(api: &Api, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let contents = api.read_resource(uri).await.map_err(|e| failed(e, uri))?;
    // A skill's files are whole files (SEP-2640 keeps `_meta` to its own prefix).
    let meta = (!uri.starts_with(crate::api::skill::URI))
        .then(|| {
            serde_json::from_value(json!({
                "total_bytes": contents.total_bytes,
                "offset": contents.offset,
            }))
            .ok()
        })
        .flatten();
    Ok(ReadResourceResult::new(vec![
        ResourceContents::TextResourceContents {
            uri: uri.to_owned(),
            mime_type: Some(contents.mime_type.to_owned()),
            text: contents.text,
            meta,
        },
    ]))
}

/// A resource that is not there is -32002 (resource not found; rmcp
/// answers -32602 to a session at 2026-07-28 or newer, as SEP-2164 says),
/// with the coded error and the `uri` asked as data; anything else an
/// internal error.
fn failed(error: ToolError, uri: &str) -> ErrorData {
    let mut data = error.to_json();
    if !uri.is_empty() {
        data["uri"] = json!(uri);
    }
    let data = Some(data);
    match error.code.id {
        "R0120" | "R0121" | "R0122" | "E0068" => ErrorData::resource_not_found(error.message, data),
        _ => ErrorData::internal_error(error.message, data),
    }
}
