//! The MCP server: the six tools of [`crate::api`] behind rmcp's
//! [`ServerHandler`], shared by every transport.

mod agents;
mod resources;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

use crate::api::{Api, INSTRUCTIONS, ToolSpec, tools};
use crate::headline::headline;

pub use agents::{AgentSessions, SessionLevel};

/// One MCP session's handler (cheap: it shares the [`Api`]).
#[derive(Clone, Debug)]
pub struct OpcodeServer {
    api: Api,
    tools: Arc<Vec<Tool>>,
    sessions: Arc<AgentSessions>,
    level: SessionLevel,
}

impl OpcodeServer {
    /// A handler over `api`, remembering agents' sessions in `sessions`.
    pub fn new(api: Api, sessions: Arc<AgentSessions>) -> OpcodeServer {
        let tools = tools().iter().map(listed).collect();
        OpcodeServer {
            api,
            tools: Arc::new(tools),
            sessions,
            level: SessionLevel::default(),
        }
    }

    /// A handler for a new session (or a stateless request): the same
    /// tools, its own log level.
    pub fn for_session(&self) -> OpcodeServer {
        OpcodeServer {
            api: self.api.clone(),
            tools: self.tools.clone(),
            sessions: self.sessions.clone(),
            level: SessionLevel::default(),
        }
    }
}

/// A tool as `tools/list` shows it.
fn listed(spec: &ToolSpec) -> Tool {
    let object = |schema: &Value| match schema {
        Value::Object(map) => map.clone(),
        _ => JsonObject::new(),
    };
    let mut tool = Tool::new(
        spec.name.clone(),
        spec.description.clone(),
        Arc::new(object(&spec.input_schema)),
    );
    tool.output_schema = Some(Arc::new(object(&spec.output_schema)));
    tool.annotations = serde_json::from_value(json!({
        "readOnlyHint": spec.hints.read_only,
        "destructiveHint": spec.hints.destructive,
        "idempotentHint": spec.hints.idempotent,
        "openWorldHint": spec.hints.open_world,
    }))
    .ok();
    tool
}

/// A result carrying an image (`{mime_type, image}`, base64) as MCP image
/// content, with the rest as structured content.
fn image_result(value: &Value) -> Option<CallToolResult> {
    let mime = value.get("mime_type")?.as_str()?;
    let data = value.get("image")?.as_str()?;
    let mut rest = value.as_object()?.clone();
    rest.remove("image");
    let mut result = CallToolResult::success(vec![rmcp::model::ContentBlock::image(data, mime)]);
    result.structured_content = Some(Value::Object(rest));
    Some(result)
}

/// A successful result as structured content, with its JSON as the text
/// content too, or (`terse`: the 2026-07-28 revision, whose clients read
/// `structuredContent`) a one-line headline instead.
fn structured(value: Value, terse: bool) -> CallToolResult {
    if !terse {
        return CallToolResult::structured(value);
    }
    let mut result =
        CallToolResult::success(vec![rmcp::model::ContentBlock::text(headline(&value))]);
    result.structured_content = Some(value);
    result
}

impl ServerHandler for OpcodeServer {
    #[allow(deprecated)] // logging is still how session clients get workflow.notify
    fn get_info(&self) -> ServerConfig {
        // Logging: `workflow.notify` messages arrive as log notifications.
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_logging()
                .build(),
        )
        .with_server_info(Implementation::new("opcode", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    #[allow(deprecated)] // the session revisions still have logging/setLevel
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.level.set(request.level);
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        resources::list(&self.api).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        Ok(resources::read(&self.api, &request.uri).await?.into())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.as_ref().clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(Value::String(agent)) =
            request.arguments.as_ref().and_then(|a| a.get("agent_id"))
        {
            self.sessions
                .remember(agent, context.peer.clone(), self.level.clone());
        }
        if !self.tools.iter().any(|t| t.name == request.name) {
            let names: Vec<&str> = self.tools.iter().map(|t| t.name.as_ref()).collect();
            return Err(ErrorData::invalid_params(
                format!(
                    "there is no tool `{}`: use {}",
                    request.name,
                    names.join(", ")
                ),
                Some(json!({ "tools": names })),
            ));
        }
        let args = request.arguments.map_or(Value::Null, Value::Object);
        let terse = context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        let result = match self.api.call(&request.name, args).await {
            Ok(value) => image_result(&value).unwrap_or_else(|| structured(value, terse)),
            Err(error) => CallToolResult::structured_error(error.to_json()),
        };
        Ok(result.into())
    }
}
