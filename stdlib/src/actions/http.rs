//! `http.request`, `http.get`, `http.post`.

use opcode_vm::catalog::{ActionSpec, Ty};

use super::spec::action;

fn with_common(b: super::spec::Builder) -> super::spec::Builder {
    b.req("url", Ty::String, "absolute http:// or https:// URL")
        .opt("headers", Ty::map(Ty::Any), "request headers; values are sent as text")
        .opt("body", Ty::Any, "request body; omitted or null sends none")
        .opt("body_encoding", Ty::one_of_strings(&["json", "form", "text", "raw"]), "how `body` is encoded (default json)")
        .opt("auth", Ty::object([("type", Ty::one_of_strings(&["bearer", "basic", "api_key"]))]), "{type: bearer, token} | {type: basic, username, password} | {type: api_key, header_name, header_value}")
        .opt("timeout", Ty::Duration, "request timeout (default 30s)")
        .opt("follow_redirects", Ty::Bool, "follow 3xx responses (default true)")
        .opt("max_redirects", Ty::Int, "most redirects to follow (default 10)")
        .opt("tls_skip_verify", Ty::Bool, "accept any TLS certificate (default false)")
        .opt("fail_on_error_status", Ty::Bool, "fail on status >= 400 (default false: the status is data); 5xx, 408 and 429 are retryable, other 4xx not")
}

/// The HTTP response as a step output.
pub fn output() -> Ty {
    Ty::object([
        ("status_code", Ty::Int),
        ("status", Ty::String),
        ("headers", Ty::map(Ty::String)),
        ("body", Ty::Any),
        ("content_type", Ty::String),
        ("duration_ms", Ty::Int),
        ("truncated", Ty::Bool),
        ("dropped_bytes", Ty::Int),
    ])
}

/// Signatures.
pub fn specs() -> Vec<ActionSpec> {
    vec![
        with_common(action("http.request", "Sends an HTTP request. The body is parsed as JSON when the response says application/json. Non-2xx responses are data, not failures, unless `fail_on_error_status` is set. A body over 10 MiB is cut there: `truncated` says so and `dropped_bytes` how much was left out."))
            .opt("method", Ty::String, "HTTP method (default GET)")
            .output(output()),
        with_common(action("http.get", "Sends a GET request; see http.request.")).output(output()),
        with_common(action("http.post", "Sends a POST request; see http.request.")).output(output()),
    ]
}

/// A shared client (the ring TLS provider is installed once).
#[cfg(feature = "runtime")]
pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::limited(10))
        .build()
        .unwrap_or_default()
}

/// Largest response body read.
#[cfg(feature = "runtime")]
const MAX_BODY: usize = 10 * 1024 * 1024;

/// Runs `http.<name>`.
#[cfg(feature = "runtime")]
pub async fn run(
    shared: &reqwest::Client,
    name: &str,
    call: &crate::call::Call,
) -> Result<serde_json::Value, opcode_vm::error::ActionError> {
    use std::time::{Duration, Instant};

    use opcode_vm::error::ActionError;
    use serde_json::{Map, Value, json};

    let method = match name {
        "get" => "GET".to_owned(),
        "post" => "POST".to_owned(),
        "request" => call.str("method").unwrap_or("GET").to_ascii_uppercase(),
        _ => return Err(super::unknown(call)),
    };
    let url_text = call.required("url")?;
    let url = reqwest::Url::parse(url_text)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .ok_or_else(|| {
            ActionError::validation(format!(
                "`url` must be an absolute http(s) URL, got {url_text:?}"
            ))
        })?;
    let method = reqwest::Method::from_bytes(method.as_bytes())
        .map_err(|_| ActionError::validation(format!("invalid HTTP method `{method}`")))?;
    let follow = call.flag("follow_redirects", true);
    let max_redirects = call
        .params
        .get("max_redirects")
        .and_then(Value::as_u64)
        .unwrap_or(10) as usize;
    let insecure = call.flag("tls_skip_verify", false);
    let client = if follow && max_redirects == 10 && !insecure {
        shared.clone()
    } else {
        let policy = if follow {
            reqwest::redirect::Policy::limited(max_redirects)
        } else {
            reqwest::redirect::Policy::none()
        };
        reqwest::Client::builder()
            .redirect(policy)
            .tls_danger_accept_invalid_certs(insecure)
            .build()
            .map_err(|e| ActionError::execution(format!("cannot build HTTP client: {e}")))?
    };
    let timeout = call.duration("timeout", Duration::from_secs(30));
    let mut request = client.request(method, url).timeout(timeout);
    match call.params.get("body").filter(|b| !b.is_null()) {
        None => {}
        Some(body) => match call.str("body_encoding").unwrap_or("json") {
            "form" => {
                if let Value::Object(map) = body {
                    let pairs: Vec<(String, String)> =
                        map.iter().map(|(k, v)| (k.clone(), text_of(v))).collect();
                    request = request.form(&pairs);
                }
            }
            "text" => {
                request = request
                    .header("Content-Type", "text/plain")
                    .body(text_of(body));
            }
            "raw" => request = request.body(text_of(body)),
            _ => {
                request = request
                    .header("Content-Type", "application/json")
                    .body(body.to_string());
            }
        },
    }
    if let Some(Value::Object(headers)) = call.params.get("headers") {
        for (k, v) in headers {
            request = request.header(k.as_str(), text_of(v));
        }
    }
    if let Some(auth) = call.params.get("auth") {
        let field = |n: &str| auth.get(n).and_then(Value::as_str).unwrap_or_default();
        request = match field("type") {
            "bearer" => request.bearer_auth(field("token")),
            "basic" => request.basic_auth(field("username"), Some(field("password"))),
            "api_key" => request.header(field("header_name"), field("header_value")),
            _ => request,
        };
    }
    let started = Instant::now();
    let mut response = request
        .send()
        .await
        .map_err(|e| ActionError::execution(format!("HTTP request to {url_text} failed: {e}")))?;
    let status = response.status();
    let mut headers = Map::new();
    for (name, value) in response.headers() {
        let key = canonical_header(name.as_str());
        if !headers.contains_key(&key) {
            headers.insert(
                key,
                Value::String(value.to_str().unwrap_or_default().to_owned()),
            );
        }
    }
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let mut bytes = Vec::new();
    let mut dropped: u64 = 0;
    while let Some(chunk) = response.chunk().await.map_err(|e| {
        ActionError::execution(format!("reading the response of {url_text} failed: {e}"))
    })? {
        dropped += keep(&mut bytes, &chunk, MAX_BODY);
    }
    let body = if bytes.is_empty() {
        Value::Null
    } else if content_type.contains("application/json") {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    } else {
        Value::String(String::from_utf8_lossy(&bytes).into_owned())
    };
    let output = json!({
        "status_code": status.as_u16(),
        "status": format!("{} {}", status.as_u16(), status.canonical_reason().unwrap_or_default()).trim_end().to_owned(),
        "headers": headers,
        "body": body,
        "content_type": content_type,
        "duration_ms": started.elapsed().as_millis() as u64,
        "truncated": dropped > 0,
        "dropped_bytes": dropped,
    });
    if call.flag("fail_on_error_status", false) && status.as_u16() >= 400 {
        let message = format!("{url_text} answered {status}");
        // A 4xx is the target's answer to this request (it is up), except
        // a timeout (408) or too many requests (429): those may pass.
        let error = if status.is_client_error() && !matches!(status.as_u16(), 408 | 429) {
            ActionError::new(opcode_vm::codes::R0100, "NON_RETRYABLE", message, false)
        } else {
            ActionError::execution(message)
        };
        return Err(error.with_details(output));
    }
    Ok(output)
}

/// Appends what fits of `chunk` to `bytes` (at most `cap` in all), and
/// answers how many bytes were left out.
#[cfg(feature = "runtime")]
fn keep(bytes: &mut Vec<u8>, chunk: &[u8], cap: usize) -> u64 {
    let kept = chunk.len().min(cap.saturating_sub(bytes.len()));
    bytes.extend_from_slice(&chunk[..kept]);
    (chunk.len() - kept) as u64
}

/// A JSON value as header or form text: strings raw, others as JSON.
#[cfg(feature = "runtime")]
fn text_of(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `content-type` → `Content-Type` (the spelling opcode returned).
#[cfg(feature = "runtime")]
fn canonical_header(name: &str) -> String {
    name.split('-')
        .map(|part| {
            let mut chars = part.chars();
            chars.next().map_or_else(String::new, |c| {
                c.to_ascii_uppercase().to_string() + chars.as_str()
            })
        })
        .collect::<Vec<_>>()
        .join("-")
}

#[cfg(all(test, feature = "runtime"))]
mod tests {
    use super::*;

    #[test]
    fn a_body_over_the_cap_is_cut_and_counted() {
        let mut bytes = Vec::new();
        let dropped: u64 = [&b"abc"[..], b"def", b"gh"]
            .iter()
            .map(|chunk| keep(&mut bytes, chunk, 4))
            .sum();
        assert_eq!((bytes.as_slice(), dropped), (&b"abcd"[..], 4));
    }
}
