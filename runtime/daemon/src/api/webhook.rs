//! `triggers.webhook`: a template's HTTP endpoint (spec/mcp.md, webhooks).
//! What the trigger asks for, how a delivery is authenticated, and its
//! delivery id. The HTTP route is `serve::hooks`.

use hmac::{Hmac, KeyInit, Mac};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The shortest secret a webhook accepts: a shorter one is guessed.
pub const MIN_SECRET_LEN: usize = 16;
/// How old a Stripe signature's timestamp may be, in seconds.
const STRIPE_TOLERANCE_S: i64 = 300;
/// What `triggers.webhook` may hold.
const KEYS: [&str; 7] = [
    "secret",
    "auth",
    "signature_header",
    "delivery",
    "body_as",
    "params",
    "debounce",
];
/// Where the delivery id is looked for when the trigger does not say.
const DELIVERY_HEADERS: [&str; 3] = ["Idempotency-Key", "Webhook-Id", "X-GitHub-Delivery"];

/// How a delivery proves it comes from the sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// HMAC-SHA256 of the body in hex, in `header`, optionally after `sha256=`
    /// (GitHub's `X-Hub-Signature-256`, the default).
    Hmac {
        /// The header carrying the signature.
        header: String,
    },
    /// Stripe's `Stripe-Signature: t=…,v1=…` over `t.body`, at most 5 minutes old.
    Stripe,
    /// `Authorization: Bearer <secret>`.
    Token,
}

/// Where a delivery's id is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// The first of these headers present.
    Headers(Vec<String>),
    /// The string (or number) at this JSON Pointer in the body.
    Body(String),
}

/// A template's `triggers.webhook`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// The vault secret (or `OPCODE_SECRET_<NAME>`) the sender shares.
    pub secret: String,
    /// How deliveries are authenticated.
    pub auth: Auth,
    /// Where their id is.
    pub delivery: Delivery,
    /// The input that gets the body (`None`: the body is the params).
    pub body_as: Option<String>,
    /// Params every delivery's run gets, under the body's.
    pub params: Map<String, Value>,
    /// How a burst of deliveries gathers into one run, if it does.
    pub debounce: Option<super::debounce::Debounce>,
}

/// Why a `triggers.webhook` is refused: the pointer under the arguments and
/// the message.
pub type Invalid = (String, String);

impl Webhook {
    /// The webhook `triggers` asks for; `None` without one.
    pub fn of(triggers: &Map<String, Value>) -> Result<Option<Webhook>, Invalid> {
        let Some(hook) = triggers.get("webhook").filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        let at = |key: &str| {
            format!(
                "/triggers/webhook{}",
                if key.is_empty() {
                    String::new()
                } else {
                    format!("/{key}")
                }
            )
        };
        let Value::Object(hook) = hook else {
            return Err((at(""), "`triggers.webhook` must be an object".into()));
        };
        for key in hook.keys() {
            if !KEYS.contains(&key.as_str()) {
                return Err((
                    at(key),
                    format!("`triggers.webhook` has no `{key}` ({})", KEYS.join(", ")),
                ));
            }
        }
        let text = |key: &str| match hook.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if !s.trim().is_empty() => Ok(Some(s.clone())),
            Some(_) => Err((
                at(key),
                format!("`triggers.webhook.{key}` must be a non-empty string"),
            )),
        };
        let secret = text("secret")?.ok_or_else(|| {
            (
                at("secret"),
                "`triggers.webhook.secret` names the vault secret the sender signs with \
                 (opcode secret set NAME)"
                    .to_owned(),
            )
        })?;
        let header = text("signature_header")?;
        let auth = match text("auth")?.as_deref() {
            None | Some("hmac") => Auth::Hmac {
                header: header.unwrap_or_else(|| "X-Hub-Signature-256".into()),
            },
            Some(other) if header.is_some() => {
                return Err((
                    at("signature_header"),
                    format!("`signature_header` is for `auth: hmac`, not `{other}`"),
                ));
            }
            Some("stripe") => Auth::Stripe,
            Some("token") => Auth::Token,
            Some(other) => {
                return Err((
                    at("auth"),
                    format!("`triggers.webhook.auth` is hmac, stripe or token, not `{other}`"),
                ));
            }
        };
        let delivery = match text("delivery")? {
            None => Delivery::Headers(DELIVERY_HEADERS.iter().map(|h| (*h).to_owned()).collect()),
            Some(place) => match place.split_once(':') {
                Some(("header", name)) if !name.is_empty() => {
                    Delivery::Headers(vec![name.to_owned()])
                }
                Some(("body", pointer)) if pointer.starts_with('/') => {
                    Delivery::Body(pointer.to_owned())
                }
                _ => {
                    return Err((
                        at("delivery"),
                        format!(
                            "`triggers.webhook.delivery` is `header:NAME` or `body:/json/pointer`, \
                             not `{place}`"
                        ),
                    ));
                }
            },
        };
        let params = match hook.get("params") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(params)) => params.clone(),
            Some(_) => {
                return Err((
                    at("params"),
                    "`triggers.webhook.params` must be an object".into(),
                ));
            }
        };
        let debounce = match hook.get("debounce") {
            None | Some(Value::Null) => None,
            Some(block) => Some(super::debounce::Debounce::of(block, |key| {
                at(&if key.is_empty() {
                    "debounce".to_owned()
                } else {
                    format!("debounce/{key}")
                })
            })?),
        };
        Ok(Some(Webhook {
            secret,
            auth,
            delivery,
            body_as: text("body_as")?,
            params,
            debounce,
        }))
    }

    /// Whether a delivery with `headers` (by name, case-insensitive) and
    /// `body` was sent by whoever holds `secret`; `now_s` is the clock.
    pub fn authentic<'h>(
        &self,
        secret: &str,
        header: impl Fn(&str) -> Option<&'h str>,
        body: &[u8],
        now_s: i64,
    ) -> bool {
        match &self.auth {
            Auth::Hmac { header: name } => header(name).is_some_and(|given| {
                let hex = given.trim().strip_prefix("sha256=").unwrap_or(given.trim());
                signed(secret, &[body], hex)
            }),
            Auth::Stripe => {
                header("Stripe-Signature").is_some_and(|given| stripe(secret, given, body, now_s))
            }
            Auth::Token => header("Authorization")
                .and_then(|h| h.strip_prefix("Bearer "))
                .is_some_and(|token| {
                    crate::secrets_compared::same(token.as_bytes(), secret.as_bytes())
                }),
        }
    }

    /// The params of the run a delivery of `body` starts.
    pub fn params_of(&self, body: Value) -> Value {
        let mut params = self.params.clone();
        match (&self.body_as, body) {
            (Some(name), body) => {
                params.insert(name.clone(), body);
            }
            (None, Value::Object(body)) => params.extend(body),
            (None, _) => {}
        }
        Value::Object(params)
    }

    /// The delivery's id, if it has one.
    pub fn delivery_id<'h>(
        &self,
        header: impl Fn(&str) -> Option<&'h str>,
        body: &Value,
    ) -> Option<String> {
        let id = match &self.delivery {
            Delivery::Headers(names) => names.iter().find_map(|n| header(n)).map(str::to_owned),
            Delivery::Body(pointer) => match body.pointer(pointer) {
                Some(Value::String(s)) => Some(s.clone()),
                Some(Value::Number(n)) => Some(n.to_string()),
                _ => None,
            },
        };
        id.filter(|id| !id.trim().is_empty())
    }
}

/// The run a delivery starts: the same for the same template and delivery
/// id, so a delivery sent again finds the run it started.
pub fn run_id(template: &str, delivery: &str) -> String {
    let digest = Sha256::digest(format!("{template}\0{delivery}").as_bytes());
    format!("hook-{}", hex::encode(&digest[..12]))
}

/// Does `hex` carry the HMAC-SHA256 by `secret` of `parts` put together?
/// Compared in constant time.
fn signed(secret: &str, parts: &[&[u8]], hex: &str) -> bool {
    let Ok(given) = hex::decode(hex) else {
        return false;
    };
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(secret.as_bytes()) else {
        return false;
    };
    for part in parts {
        mac.update(part);
    }
    mac.verify_slice(&given).is_ok()
}

/// Stripe's scheme: `t=TIMESTAMP,v1=SIGNATURE[,v1=…]`.
fn stripe(secret: &str, header: &str, body: &[u8], now_s: i64) -> bool {
    let mut timestamp = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", t)) => timestamp = t.parse::<i64>().ok(),
            Some(("v1", v)) => signatures.push(v),
            _ => {}
        }
    }
    let Some(t) = timestamp.filter(|t| (now_s - t).abs() <= STRIPE_TOLERANCE_S) else {
        return false;
    };
    let prefix = format!("{t}.");
    signatures
        .iter()
        .any(|v| signed(secret, &[prefix.as_bytes(), body], v))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    fn hook(value: &Value) -> Result<Option<Webhook>, Invalid> {
        Webhook::of(value.as_object().unwrap())
    }

    fn sign(secret: &str, payload: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(payload);
        hex::encode(mac.finalize().into_bytes())
    }

    const SECRET: &str = "a-shared-secret-of-some-length";

    #[test]
    fn github_style_signatures_are_checked_over_the_raw_body() {
        let webhook = hook(&json!({"webhook": {"secret": "GH"}}))
            .unwrap()
            .unwrap();
        let body = br#"{"action":"opened"}"#;
        let good = format!("sha256={}", sign(SECRET, body));
        let check = |value: &str, secret: &str, body: &[u8]| {
            webhook.authentic(
                secret,
                |n| (n == "X-Hub-Signature-256").then_some(value),
                body,
                0,
            )
        };
        assert!(check(&good, SECRET, body));
        assert!(!check(&good, SECRET, br#"{"action":"closed"}"#));
        assert!(!check(&good, "another-secret-entirely", body));
        assert!(!check("sha256=zz", SECRET, body));
        assert!(!webhook.authentic(SECRET, |_| None, body, 0));
    }

    #[test]
    fn stripe_signatures_carry_a_recent_timestamp() {
        let webhook = hook(&json!({"webhook": {"secret": "ST", "auth": "stripe"}}))
            .unwrap()
            .unwrap();
        let body = br#"{"id":"evt_1"}"#;
        let signature = sign(SECRET, &[b"1700000000.".as_slice(), body].concat());
        let header = format!("t=1700000000,v1=deadbeef,v1={signature}");
        let get = |name: &str| (name == "Stripe-Signature").then_some(header.as_str());
        assert!(webhook.authentic(SECRET, get, body, 1_700_000_100));
        assert!(!webhook.authentic(SECRET, get, body, 1_700_000_000 + 301));
    }

    #[test]
    fn a_token_is_a_bearer_header() {
        let webhook = hook(&json!({"webhook": {"secret": "T", "auth": "token"}}))
            .unwrap()
            .unwrap();
        let bearer = format!("Bearer {SECRET}");
        assert!(webhook.authentic(
            SECRET,
            |n| (n == "Authorization").then_some(bearer.as_str()),
            b"",
            0
        ));
        assert!(!webhook.authentic(
            SECRET,
            |n| (n == "Authorization").then_some("Bearer nope"),
            b"",
            0
        ));
    }

    #[test]
    fn delivery_ids_come_from_a_header_or_the_body() {
        let default = hook(&json!({"webhook": {"secret": "S"}})).unwrap().unwrap();
        let github = |n: &str| (n == "X-GitHub-Delivery").then_some("72d3162e");
        assert_eq!(
            default.delivery_id(github, &json!({})).as_deref(),
            Some("72d3162e")
        );
        let body = hook(&json!({"webhook": {"secret": "S", "delivery": "body:/id"}}))
            .unwrap()
            .unwrap();
        assert_eq!(
            body.delivery_id(|_| None, &json!({"id": "evt_1"}))
                .as_deref(),
            Some("evt_1")
        );
        assert_eq!(body.delivery_id(|_| None, &json!({})), None);
        assert_eq!(run_id("t", "evt_1"), run_id("t", "evt_1"));
        assert_ne!(run_id("t", "evt_1"), run_id("u", "evt_1"));
    }

    #[test]
    fn a_bad_trigger_is_refused_with_its_pointer() {
        let refused = |value: Value| hook(&value).unwrap_err().0;
        assert_eq!(refused(json!({"webhook": {}})), "/triggers/webhook/secret");
        assert_eq!(
            refused(json!({"webhook": {"secret": "S", "auth": "basic"}})),
            "/triggers/webhook/auth"
        );
        assert_eq!(
            refused(json!({"webhook": {"secret": "S", "delivery": "query:x"}})),
            "/triggers/webhook/delivery"
        );
        assert_eq!(
            refused(json!({"webhook": {"secret": "S", "sekret": 1}})),
            "/triggers/webhook/sekret"
        );
        assert_eq!(
            refused(json!({"webhook": {"secret": "S", "auth": "token", "signature_header": "X"}})),
            "/triggers/webhook/signature_header"
        );
        assert_eq!(
            refused(json!({"webhook": {"secret": "S", "params": []}})),
            "/triggers/webhook/params"
        );
        assert_eq!(hook(&json!({"cron": "* * * * *"})).unwrap(), None);
    }

    #[test]
    fn the_body_is_the_params_or_one_of_them() {
        let plain = hook(&json!({"webhook": {"secret": "S", "params": {"to": "x", "a": 0}}}))
            .unwrap()
            .unwrap();
        assert_eq!(plain.params_of(json!({"a": 1})), json!({"to": "x", "a": 1}));
        let wrapped =
            hook(&json!({"webhook": {"secret": "S", "body_as": "payload", "params": {"to": "x"}}}))
                .unwrap()
                .unwrap();
        assert_eq!(
            wrapped.params_of(json!([1])),
            json!({"to": "x", "payload": [1]})
        );
    }
}
