//! The MCP server: the six tools of [`crate::api`] behind rmcp's
//! [`ServerHandler`], shared by every transport.

mod agents;
mod elicit;
mod prompts;
mod resources;
mod tasks;
mod watch;

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams,
    GetPromptRequestParams, GetPromptResponse, GetSkillRequestParams, GetSkillResult,
    GetTaskParams, GetTaskResult, Implementation, JsonObject, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult, ListToolsResult,
    PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ServerCapabilities, ServerConfig, SubscribeRequestParams, SubscriptionFilter, Tool,
    UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::api::{Api, INSTRUCTIONS, ToolError, ToolSpec, tools};
use crate::headline::headline;

pub use agents::{AgentSessions, SessionLevel};

/// One MCP session's handler (cheap: it shares the [`Api`]).
#[derive(Clone, Debug)]
pub struct OpcodeServer {
    api: Api,
    tools: Arc<Vec<Tool>>,
    sessions: Arc<AgentSessions>,
    level: SessionLevel,
    subscriptions: watch::Subscriptions,
    elicitor: Option<Arc<elicit::Elicitor>>,
    /// The agents that called from this session.
    agents: Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
    /// Cancelled when the session's last handler is dropped.
    ended: Arc<DropGuard>,
}

impl OpcodeServer {
    /// A handler over `api`, remembering agents' sessions in `sessions`.
    pub fn new(api: Api, sessions: Arc<AgentSessions>) -> OpcodeServer {
        let tools = tools().iter().map(listed_tool).collect();
        let elicitor = elicit::Elicitor::start(&api, sessions.clone());
        OpcodeServer {
            api,
            tools: Arc::new(tools),
            sessions,
            level: SessionLevel::default(),
            subscriptions: watch::Subscriptions::default(),
            elicitor,
            agents: Arc::default(),
            ended: Arc::new(CancellationToken::new().drop_guard()),
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
            subscriptions: watch::Subscriptions::default(),
            elicitor: self.elicitor.clone(),
            agents: Arc::default(),
            ended: Arc::new(CancellationToken::new().drop_guard()),
        }
    }
}

/// A tool as `tools/list` shows it.
fn listed_tool(spec: &ToolSpec) -> Tool {
    let mut tool = Tool::new(
        spec.name.clone(),
        spec.description.clone(),
        Arc::new(json_object(&spec.input_schema)),
    );
    tool.output_schema = Some(Arc::new(json_object(&spec.output_schema)));
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
pub(crate) fn structured(value: Value, terse: bool) -> CallToolResult {
    if !terse {
        return CallToolResult::structured(value);
    }
    let mut result =
        CallToolResult::success(vec![rmcp::model::ContentBlock::text(headline(&value))]);
    result.structured_content = Some(value);
    result
}

/// A failed call: `isError`, with the error's JSON (`{"error": {code,
/// name, message, details}}`) as its text and no structured content. Each
/// tool's `outputSchema` describes its success; clients that validate
/// structured content against it (the TypeScript SDK) would throw on an
/// error there, and the agent would never see the code (spec/mcp.md
/// "Tools", decision 0046).
fn error_result(error: &ToolError) -> CallToolResult {
    CallToolResult::error(vec![rmcp::model::ContentBlock::text(
        error.to_json().to_string(),
    )])
}

impl OpcodeServer {
    /// `agent` called from this session: the first time, the decisions
    /// waiting for it are asked here (when decisions are elicited).
    fn arrived(&self, agent: &str) {
        let Some(elicitor) = self.elicitor.clone() else {
            return;
        };
        let first = self
            .agents
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(agent.to_owned());
        if first {
            let agent = agent.to_owned();
            tokio::spawn(async move { elicitor.arrived(&agent).await });
        }
    }

    /// JSON-RPC -32602 for a tool that is not there, naming those that are.
    async fn no_such_tool(&self, name: &str) -> ErrorData {
        let mut names: Vec<String> = self.tools.iter().map(|t| t.name.to_string()).collect();
        if let Ok(exposed) = self.api.template_tools().await {
            names.extend(exposed.into_iter().map(|t| t.name));
        }
        ErrorData::invalid_params(
            format!("there is no tool `{name}`: use {}", names.join(", ")),
            Some(json!({ "tools": names })),
        )
    }
}

/// The version a call of a template tool pins in its `_meta`
/// (`"opcode/version": 3` or `"v3"`), if any.
fn pinned_version(meta: Option<&rmcp::model::RequestMetaObject>) -> Option<i64> {
    let value = meta?.get("opcode/version")?;
    value.as_i64().or_else(|| {
        value
            .as_str()
            .and_then(|v| v.strip_prefix('v').unwrap_or(v).parse().ok())
    })
}

/// A tool error where the protocol wants a JSON-RPC error: internal, with
/// the coded error as data.
fn internal(error: ToolError) -> ErrorData {
    let data = Some(error.to_json());
    ErrorData::internal_error(error.message, data)
}

/// A JSON value as a JSON object (anything else: empty).
fn json_object(value: &Value) -> JsonObject {
    match value {
        Value::Object(map) => map.clone(),
        _ => JsonObject::new(),
    }
}

impl ServerHandler for OpcodeServer {
    #[allow(deprecated)] // logging is still how session clients get workflow.notify
    fn get_info(&self) -> ServerConfig {
        // Logging: `workflow.notify` messages arrive as log notifications.
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_tasks()
                .enable_prompts()
                .enable_skills()
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

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        watch::follow_session(
            context.peer,
            &self.api,
            self.subscriptions.clone(),
            self.ended.token().clone(),
        );
    }

    #[allow(deprecated)] // the session revisions subscribe this way
    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscriptions.add(&request.uri);
        Ok(())
    }

    #[allow(deprecated)] // the session revisions unsubscribe this way
    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscriptions.remove(&request.uri);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(watch::accepted(requested))
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        watch::listen(&self.api, context).await
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

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(prompts::list())
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        Ok(prompts::get(&self.api, &request)?.into())
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, ErrorData> {
        Ok(prompts::skills())
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, ErrorData> {
        prompts::get_skill(&request)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut listed = self.tools.as_ref().clone();
        let exposed = self.api.template_tools().await.map_err(internal)?;
        listed.extend(exposed.iter().map(listed_tool));
        Ok(ListToolsResult::with_all_items(listed))
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
            self.arrived(agent);
        }
        let own = self.tools.iter().any(|t| t.name == request.name);
        let template = !own
            && self
                .api
                .is_template_tool(&request.name)
                .await
                .map_err(internal)?;
        if !own && !template {
            return Err(self.no_such_tool(&request.name).await);
        }
        let terse = context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        // A client that declared the tasks extension gets a run as a task,
        // at the revision that defines it (2026-07-28): a 2025-11-25 session
        // gets the plain result whatever it declares (spec/mcp.md "Tasks").
        let as_task = terse
            && (template || request.name == "opcode.run")
            && context
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks());
        let mut args = request.arguments.map_or(Value::Null, Value::Object);
        if as_task && let Some(map) = args.as_object_mut() {
            map.insert("wait".into(), Value::Bool(false));
        }
        let outcome = if template {
            let version = pinned_version(request.meta.as_ref());
            self.api
                .call_template(&request.name, args, version, !as_task)
                .await
        } else {
            self.api.call(&request.name, args).await
        };
        Ok(match outcome {
            Ok(started) if as_task => {
                CallToolResponse::Task(tasks::created(&self.api, &started).await?)
            }
            Ok(value) => image_result(&value)
                .unwrap_or_else(|| structured(value, terse))
                .into(),
            Err(error) => error_result(&error).into(),
        })
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        let terse = context
            .protocol_version()
            .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28);
        Ok(GetTaskResult::new(
            tasks::detailed(&self.api, &request.task_id, terse).await?,
        ))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        tasks::update(&self.api, &request.task_id, request.input_responses).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        tasks::cancel(&self.api, &request.task_id).await
    }
}
