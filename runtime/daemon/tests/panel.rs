//! The panel's protections and the health and metrics routes, over a real
//! HTTP server: CSRF on every form (a token per browser session), the token
//! sign-in and its throttle, `/readyz`, `/metrics`, and the panel being off.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::Arc;

use opcode_daemon::api::Api;
use opcode_daemon::panel::Panel;
use opcode_daemon::serve::{self, Gate, Guard, SharedGuard};
use opcode_runtime::store::memory::MemoryStore;
use opcode_runtime::{Config, EventStore, Executor};
use opcode_stdlib::exec::EnvSecrets;
use reqwest::StatusCode;
use reqwest::header;
use tokio_util::sync::CancellationToken;

/// Serves the routes (with the panel when `panel`) on a free port.
async fn serve(token: Option<&str>, panel: bool) -> String {
    serve_api(memory_api(), token, panel).await
}

fn memory_api() -> Api {
    let store: Arc<dyn EventStore> = Arc::new(MemoryStore::new());
    Api::new(Executor::new(
        store,
        Arc::new(EnvSecrets),
        Config::default(),
    ))
}

async fn serve_api(api: Api, token: Option<&str>, panel: bool) -> String {
    let guard = Guard {
        tokens: token.map(str::to_owned).into_iter().collect(),
        ..Guard::default()
    };
    serve_guarded(api, guard, panel).await
}

async fn serve_guarded(api: Api, guard: Guard, panel: bool) -> String {
    let guard: SharedGuard = Gate::new(guard);
    let panel = panel.then(|| Panel::new(api.clone(), None, guard.clone(), false));
    let app = serve::router(api, None, guard, &CancellationToken::new(), panel)
        .into_make_service_with_connect_info::<SocketAddr>();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

/// `GET base+path` in the browser session `cookie`.
async fn get_in(http: &reqwest::Client, base: &str, cookie: &str, path: &str) -> reqwest::Response {
    http.get(format!("{base}{path}"))
        .header(header::COOKIE, cookie)
        .send()
        .await
        .unwrap()
}

/// A token long enough for the daemon.
const TOKEN: &str = "s3cret-s3cret-s3cret";

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

fn csrf_of(page: &str) -> String {
    let start = page.find("name=\"csrf-token\" content=\"").unwrap() + 27;
    page[start..start + 64].to_owned()
}

/// A browser session: its cookie (`name=value`) and its CSRF token.
async fn session(http: &reqwest::Client, base: &str) -> (String, String) {
    let answer = http.get(format!("{base}/")).send().await.unwrap();
    let cookie = answer.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        cookie.starts_with("opcode_session=") && cookie.contains("HttpOnly"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_owned();
    (pair, csrf_of(&answer.text().await.unwrap()))
}

#[tokio::test]
async fn forms_need_their_sessions_csrf_token() {
    let base = serve(None, true).await;
    let http = client();
    let (cookie, csrf) = session(&http, &base).await;
    let (other_cookie, other_csrf) = session(&http, &base).await;
    assert_ne!(csrf, other_csrf, "each session has its own token");
    let form = |token: &str| {
        vec![
            ("csrf", token.to_owned()),
            ("name", "x".to_owned()),
            ("source", r#"{"steps": [{"id": "a", "action": "workflow.log", "params": {"message": "hi"}}]}"#.to_owned()),
        ]
    };
    for bad in ["", "0000", &csrf[..63], &other_csrf] {
        let answer = http
            .post(format!("{base}/templates"))
            .header(header::COOKIE, &cookie)
            .form(&form(bad))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::FORBIDDEN, "token `{bad}`");
    }
    let no_session = http
        .post(format!("{base}/templates"))
        .form(&form(&csrf))
        .send()
        .await
        .unwrap();
    assert_eq!(
        no_session.status(),
        StatusCode::FORBIDDEN,
        "a token without its session"
    );
    let answer = http
        .post(format!("{base}/templates"))
        .header(header::COOKIE, &cookie)
        .form(&form(&csrf))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::SEE_OTHER);
    assert_eq!(answer.headers()[header::LOCATION], "/templates/x?version=1");
    // A script sends the token in the header, as spec/panel.md says.
    let scripted = http
        .post(format!("{base}/templates"))
        .header(header::COOKIE, &other_cookie)
        .header("X-CSRF-Token", &other_csrf)
        .form(&form("")[1..])
        .send()
        .await
        .unwrap();
    assert_eq!(scripted.status(), StatusCode::SEE_OTHER);
}

/// The tool names `tools/list` gives, asked at the stateless revision.
async fn tool_names(http: &reqwest::Client, base: &str) -> Vec<String> {
    let meta = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}
    });
    let listed: serde_json::Value = http
        .post(format!("{base}/mcp"))
        .header(header::ACCEPT, "application/json, text/event-stream")
        .header("MCP-Protocol-Version", "2026-07-28")
        .header("Mcp-Method", "tools/list")
        .json(
            &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
                                  "params": {"_meta": meta}}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let tools = listed["result"]["tools"].as_array().unwrap();
    tools
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_template_created_in_the_panel_may_be_exposed_as_a_tool() {
    let base = serve(None, true).await;
    let http = client();
    let (cookie, csrf) = session(&http, &base).await;
    let create = |fields: Vec<(&'static str, &'static str)>| {
        let mut form = vec![("csrf", csrf.as_str())];
        form.extend(fields);
        http.post(format!("{base}/templates"))
            .header(header::COOKIE, &cookie)
            .form(&form)
            .send()
    };
    let steps = r#"{"steps": [{"id": "a", "action": "crypto.uuid"}]}"#;
    let ticked = create(vec![
        ("name", "ticked"),
        ("source", steps),
        ("expose", "on"),
    ]);
    assert_eq!(ticked.await.unwrap().status(), StatusCode::SEE_OTHER);
    let plain = create(vec![("name", "plain"), ("source", steps)]);
    assert_eq!(plain.await.unwrap().status(), StatusCode::SEE_OTHER);
    let wrapper = r#"{"name": "pasted", "expose": true, "definition": {"steps": [{"id": "a", "action": "crypto.uuid"}]}}"#;
    let pasted = create(vec![("source", wrapper)]);
    assert_eq!(pasted.await.unwrap().status(), StatusCode::SEE_OTHER);
    let names = tool_names(&http, &base).await;
    assert!(names.contains(&"ticked".to_owned()), "{names:?}");
    assert!(names.contains(&"pasted".to_owned()), "{names:?}");
    assert!(!names.contains(&"plain".to_owned()), "{names:?}");
}

#[tokio::test]
async fn a_browser_signs_in_with_the_token() {
    let base = serve(Some(TOKEN), true).await;
    let http = client();
    let page = http
        .get(format!("{base}/"))
        .header(header::ACCEPT, "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::SEE_OTHER);
    assert_eq!(page.headers()[header::LOCATION], "/login");
    let api = http.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(api.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        api.headers()[header::WWW_AUTHENTICATE],
        "Bearer realm=\"opcode\"",
        "a 401 says which scheme to answer with"
    );
    let login = http.get(format!("{base}/login")).send().await.unwrap();
    assert_eq!(login.status(), StatusCode::OK);
    let wrong = http
        .post(format!("{base}/login"))
        .form(&[("token", "guess")])
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    let right = http
        .post(format!("{base}/login"))
        .form(&[("token", TOKEN)])
        .send()
        .await
        .unwrap();
    let cookie = right.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_owned();
    let signed_in = http
        .get(format!("{base}/"))
        .header(header::COOKIE, pair)
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), StatusCode::OK);
    let bearer = http
        .get(format!("{base}/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(bearer.status(), StatusCode::OK);
}

#[tokio::test]
async fn wrong_tokens_are_slowed_down_and_counted() {
    let base = serve(Some(TOKEN), true).await;
    let http = client();
    let mut statuses = Vec::new();
    for _ in 0..8 {
        let wrong = http
            .post(format!("{base}/login"))
            .form(&[("token", "guess")])
            .send()
            .await
            .unwrap();
        statuses.push(wrong.status().as_u16());
    }
    assert_eq!(statuses[..5], [401; 5], "{statuses:?}");
    assert!(statuses[5..].contains(&429), "{statuses:?}");
    // The right token, sent too soon, is not even checked.
    let soon = http
        .get(format!("{base}/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(soon.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(soon.headers().contains_key(header::RETRY_AFTER));
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let later = http
        .get(format!("{base}/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(later.status(), StatusCode::OK);
    let text = later.text().await.unwrap();
    assert!(
        text.contains("opcode_token_refusals_total{reason=\"wrong_token\"}"),
        "{text}"
    );
    assert!(
        text.contains("opcode_token_refusals_total{reason=\"throttled\"}"),
        "{text}"
    );
}

#[tokio::test]
async fn health_metrics_and_the_panel_switched_off() {
    let base = serve(None, false).await;
    let http = client();
    let ready = http.get(format!("{base}/readyz")).send().await.unwrap();
    assert_eq!(
        (ready.status(), ready.text().await.unwrap().as_str()),
        (StatusCode::OK, "ok")
    );
    let metrics = http.get(format!("{base}/metrics")).send().await.unwrap();
    assert!(
        metrics.headers()[header::CONTENT_TYPE]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    assert!(
        metrics
            .text()
            .await
            .unwrap()
            .contains("opcode_workflows{status=\"active\"} 0")
    );
    let page = http.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(page.status(), StatusCode::NOT_FOUND);
    let says = page.text().await.unwrap();
    assert!(
        says.contains("there is no `/` here: MCP is at /mcp"),
        "{says}"
    );
    let missing = http
        .get(format!("{base}/api/runs/nope/ag-ui"))
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
}

/// A parent held by its child's decision shows the child's question (with
/// the child run) on its own page, and names the run that holds it.
#[tokio::test]
async fn a_held_parents_page_shows_the_decision_of_the_run_below() {
    let api = memory_api();
    let define = |name: &str, steps: serde_json::Value| {
        api.call(
            "opcode.define",
            serde_json::json!({"name": name, "definition": {"steps": steps}}),
        )
    };
    define(
        "kid",
        serde_json::json!([{"id": "ask", "type": "reasoning", "config": {
        "prompt_context": "Ship the release?", "options": [{"id": "y"}, {"id": "n"}]}}]),
    )
    .await
    .unwrap();
    define("mom", serde_json::json!([{"id": "c", "action": "workflow.run", "params": {"template_name": "kid"}}]))
        .await
        .unwrap();
    let run = api
        .call("opcode.run", serde_json::json!({"template_name": "mom"}))
        .await
        .unwrap();
    let (parent, child) = (
        run["workflow_id"].as_str().unwrap().to_owned(),
        run["pending_decisions"][0]["workflow_id"]
            .as_str()
            .unwrap()
            .to_owned(),
    );
    let base = serve_api(api, None, true).await;
    let http = client();
    let (cookie, _) = session(&http, &base).await;
    let page = get_in(&http, &base, &cookie, &format!("/workflows/{parent}"))
        .await
        .text()
        .await
        .unwrap();
    let below = page
        .find("Decisions of runs below")
        .expect("no decisions of runs below");
    let rest = &page[below..];
    assert!(rest.contains("Ship the release?"), "{rest}");
    assert!(rest.contains(&format!("/workflows/{child}")), "{rest}");
    assert!(page.contains("Held by"), "{page}");
}

/// A run waiting for a slot of its concurrency key says so on its page,
/// naming the key and linking the run that holds it.
#[tokio::test]
async fn a_run_waiting_for_its_concurrency_slot_says_so() {
    let api = memory_api();
    let definition = serde_json::json!({"concurrency": {"limit": 1},
        "steps": [{"id": "hold", "type": "wait", "config": {"signal": "go"}}]});
    api.call(
        "opcode.define",
        serde_json::json!({"name": "solo", "definition": definition}),
    )
    .await
    .unwrap();
    let start = || {
        api.call(
            "opcode.run",
            serde_json::json!({"template_name": "solo", "wait": false}),
        )
    };
    let first = start().await.unwrap()["workflow_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let second = start().await.unwrap()["workflow_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut queued = false;
    for _ in 0..200 {
        let view = api
            .call("opcode.status", serde_json::json!({"workflow_id": second}))
            .await
            .unwrap();
        if view.get("queue").is_some() {
            queued = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(queued, "the second run never waited for the slot");
    let base = serve_api(api, None, true).await;
    let http = client();
    let (cookie, _) = session(&http, &base).await;
    let page = get_in(&http, &base, &cookie, &format!("/workflows/{second}"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("Waiting for a slot of concurrency key"),
        "{page}"
    );
    assert!(page.contains("solo:"), "{page}");
    assert!(page.contains(&format!("/workflows/{first}")), "{page}");
    // Its AG-UI stream says so too, then follows it.
    let mut stream = get_in(&http, &base, &cookie, &format!("/api/runs/{second}/ag-ui")).await;
    let mut seen = String::new();
    let read = async {
        while let Some(chunk) = stream.chunk().await.unwrap() {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("opcode.queued") {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), read).await;
    assert!(
        seen.contains("\"CUSTOM\"") && seen.contains("opcode.queued"),
        "{seen}"
    );
    assert!(seen.contains(&first), "the holder is named: {seen}");
}

/// `/decisions` shows a page of decisions at a time, with a link to the next.
#[tokio::test]
async fn decisions_come_a_page_at_a_time() {
    let api = memory_api();
    let asks = serde_json::json!([{"id": "ask", "type": "reasoning", "config": {
        "prompt_context": "Ship it?", "options": [{"id": "y"}, {"id": "n"}]}}]);
    api.call(
        "opcode.define",
        serde_json::json!({"name": "ask", "definition": {"steps": asks}}),
    )
    .await
    .unwrap();
    for _ in 0..30 {
        api.call("opcode.run", serde_json::json!({"template_name": "ask"}))
            .await
            .unwrap();
    }
    let base = serve_api(api, None, true).await;
    let http = client();
    let (cookie, _) = session(&http, &base).await;
    let first = get_in(&http, &base, &cookie, "/decisions")
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(first.matches("<article class=\"decision\"").count(), 25);
    assert!(first.contains("href=\"/decisions?page=2\""), "no next page");
    let second = get_in(&http, &base, &cookie, "/decisions?page=2")
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(second.matches("<article class=\"decision\"").count(), 5);
    assert!(!second.contains("href=\"/decisions?page=3\""));
}

/// A finished run's page offers it as a test case, downloaded as a test
/// file `opcodec test` reads; an unknown run is a 404.
#[tokio::test]
async fn a_finished_run_downloads_as_a_test_case() {
    let api = memory_api();
    api.call(
        "opcode.define",
        serde_json::json!({"name": "hello", "definition": {"steps": [
            {"id": "say", "action": "workflow.log", "params": {"message": "hi"}}]}}),
    )
    .await
    .unwrap();
    let run = api
        .call("opcode.run", serde_json::json!({"template_name": "hello"}))
        .await
        .unwrap();
    let id = run["workflow_id"].as_str().unwrap().to_owned();
    let base = serve_api(api, None, true).await;
    let http = client();
    let (cookie, _) = session(&http, &base).await;
    let page = get_in(&http, &base, &cookie, &format!("/workflows/{id}"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(&format!("/workflows/{id}/test.json")),
        "{page}"
    );
    let file = get_in(&http, &base, &cookie, &format!("/workflows/{id}/test.json")).await;
    assert_eq!(file.status(), StatusCode::OK);
    let disposition = file.headers()[header::CONTENT_DISPOSITION]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        disposition,
        format!("attachment; filename=\"{id}.test.json\"")
    );
    let file: serde_json::Value = file.json().await.unwrap();
    assert_eq!(file["cases"][0]["expect"]["status"], "completed", "{file}");
    assert_eq!(
        file["cases"][0]["expect"]["steps"]["say"]["status"],
        "completed"
    );
    let missing = get_in(&http, &base, &cookie, "/workflows/nope/test.json").await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
}

/// An unknown route gets the panel's own "not found" page, not an empty
/// body.
#[tokio::test]
async fn an_unknown_route_gets_a_not_found_page() {
    let base = serve(None, true).await;
    let http = client();
    let (cookie, _) = session(&http, &base).await;
    let page = get_in(&http, &base, &cookie, "/no/such/page").await;
    assert_eq!(page.status(), StatusCode::NOT_FOUND);
    let text = page.text().await.unwrap();
    assert!(
        text.contains("There is no page <code>/no/such/page</code> here."),
        "{text}"
    );
    assert!(text.contains("href=\"/workflows\""), "the way back: {text}");
}

/// With `open_probes`, `/livez` and `/readyz` answer without the token;
/// everything else still needs it, and without the setting so do they.
#[tokio::test]
async fn probes_may_answer_without_the_token() {
    let http = client();
    for open_probes in [true, false] {
        let guard = Guard {
            tokens: vec![TOKEN.into()],
            open_probes,
            ..Guard::default()
        };
        let base = serve_guarded(memory_api(), guard, true).await;
        for probe in ["/livez", "/readyz"] {
            let answer = http.get(format!("{base}{probe}")).send().await.unwrap();
            let want = if open_probes {
                StatusCode::OK
            } else {
                StatusCode::UNAUTHORIZED
            };
            assert_eq!(answer.status(), want, "{probe}, open_probes {open_probes}");
        }
        let metrics = http.get(format!("{base}/metrics")).send().await.unwrap();
        assert_eq!(metrics.status(), StatusCode::UNAUTHORIZED);
    }
}

/// The agent registry's pages: the catalog, a release with its skills, and
/// what changed since the release before it.
#[tokio::test]
async fn published_agents_have_pages_with_their_changes() {
    let store: Arc<dyn EventStore> = Arc::new(MemoryStore::new());
    for (version, skill) in [
        ("1.0.0", "Read the indexes.\n"),
        ("1.1.0", "Read the indexes.\nNever drop a table.\n"),
    ] {
        let src = format!(
            r#"{{"name": "db-analyzer", "version": "{version}", "role": "scout",
                "description": "Reads schemas.", "skills": [{{"name": "db", "content": "x"}}]}}"#
        );
        let definition = opcode_compiler::agent::read(&src).0.unwrap();
        let (release, skills) = opcode_runtime::registry::release_of(
            &definition,
            &[skill.to_owned()],
            "2026-12-06T00:00:00.000Z".into(),
            Some("alice".into()),
        );
        opcode_runtime::registry::publish(store.as_ref(), release, skills)
            .await
            .unwrap();
    }
    let report = r#"{"suite": "db-analyzer.eval.json", "cases": [
        {"name": "finds the index", "passed": true, "status": "completed", "failures": []},
        {"name": "never writes", "passed": false, "status": "completed",
         "failures": ["tools_not_called: `write` was called"]}]}"#;
    store
        .record_agent_eval(opcode_runtime::store::AgentEval {
            name: "db-analyzer".into(),
            version: "1.1.0".into(),
            at: "2026-12-06T00:00:01.000Z".into(),
            passed: 1,
            failed: 1,
            report: report.into(),
        })
        .await
        .unwrap();
    let api = Api::new(Executor::new(
        store,
        Arc::new(EnvSecrets),
        Config::default(),
    ));
    let base = serve_api(api, None, true).await;
    let http = client();
    let (cookie, _) = session(&http, &base).await;
    let list = get_in(&http, &base, &cookie, "/registry")
        .await
        .text()
        .await
        .unwrap();
    assert!(
        list.contains("href=\"/registry/db-analyzer\"") && list.contains("1.1.0"),
        "{list}"
    );
    assert!(list.contains("<td>1 passed, 1 failed</td>"), "{list}");
    let newest = get_in(&http, &base, &cookie, "/registry/db-analyzer").await;
    assert_eq!(newest.status(), StatusCode::OK);
    let newest = newest.text().await.unwrap();
    assert!(newest.contains("Changes from 1.0.0"), "{newest}");
    assert!(
        newest.contains("never writes")
            && newest.contains("tools_not_called: `write` was called")
            && newest.contains("<code>db-analyzer.eval.json</code>"),
        "{newest}"
    );
    assert!(
        newest.contains(r#"<span class="add">+Never drop a table."#),
        "{newest}"
    );
    let first = get_in(&http, &base, &cookie, "/registry/db-analyzer?version=1.0.0").await;
    let first = first.text().await.unwrap();
    assert!(
        first.contains("nothing before it")
            && !first.contains("Never drop")
            && first.contains("No eval suite has run on this release"),
        "{first}"
    );
    let unknown = get_in(&http, &base, &cookie, "/registry/db-analyser").await;
    assert_eq!(unknown.status(), StatusCode::NOT_FOUND);
}
