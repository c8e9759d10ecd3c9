//! The MCP server: the six tools of [`crate::api`] behind rmcp's
//! [`ServerHandler`], shared by every transport.

mod agents;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, JsonObject,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::Value;

use crate::api::{Api, INSTRUCTIONS, tools};

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
        let tools = tools()
            .into_iter()
            .map(|spec| {
                let schema: JsonObject = match spec.input_schema {
                    Value::Object(map) => map,
                    _ => JsonObject::new(),
                };
                Tool::new(spec.name, spec.description, Arc::new(schema))
            })
            .collect();
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

impl ServerHandler for OpcodeServer {
    #[allow(deprecated)] // logging is still how session clients get workflow.notify
    fn get_info(&self) -> ServerConfig {
        // Logging: `workflow.notify` messages arrive as log notifications.
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
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
        let args = request.arguments.map_or(Value::Null, Value::Object);
        let result = match self.api.call(&request.name, args).await {
            Ok(value) => image_result(&value).unwrap_or_else(|| CallToolResult::structured(value)),
            Err(error) => CallToolResult::structured_error(error.to_json()),
        };
        Ok(result.into())
    }
}
