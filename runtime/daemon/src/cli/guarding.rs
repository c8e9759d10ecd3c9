//! The rules the daemon's guard settings meet, the same at start and at
//! every reload (SIGHUP): a reload that a start would refuse is refused,
//! and the settings in force are kept (spec/security.md, "Reloads").

use std::net::SocketAddr;

use opcode_daemon::serve::guard::valid_token;
use opcode_daemon::settings::Settings;
use opcode_daemon::tenants::Tenant;

/// The tenants `settings` describe, or why a daemon listening on `listen`
/// refuses them: an unknown log level, a token too short or with spaces,
/// no token off loopback, a tenant badly written.
pub(super) fn checked(listen: &SocketAddr, settings: &Settings) -> Result<Vec<Tenant>, String> {
    if let Some(level) = settings.log_level.as_deref()
        && !LEVELS.contains(&level)
    {
        return Err(unknown_level_message(level));
    }
    if let Some(token) = &settings.token {
        valid_token(token)?;
    }
    if let Some(problem) = exposure_problem(listen, settings) {
        return Err(problem);
    }
    settings.tenants()
}

/// What a SIGHUP applies: the settings read anew, if a start on `listen`
/// would take them and every tenant in `served` is still there (a
/// tenant's routes are removed only by a restart).
pub(super) fn reloaded(
    read: Result<Settings, String>,
    listen: &SocketAddr,
    served: &[Option<String>],
) -> Result<(Settings, Vec<Tenant>), String> {
    let settings = read?;
    let tenants = checked(listen, &settings)?;
    for name in served.iter().flatten() {
        if !tenants.iter().any(|t| &t.name == name) {
            return Err(format!(
                "tenant `{name}` is gone from the settings: restart to remove a tenant"
            ));
        }
    }
    Ok((settings, tenants))
}

/// The log levels `--log-level` and `log_level` take.
pub(super) const LEVELS: [&str; 5] = ["error", "warn", "info", "debug", "trace"];

/// Why `level` is refused, with the closest level when there is one.
pub(super) fn unknown_level_message(level: &str) -> String {
    let close = opcode_compiler::diagnostics::did_you_mean(level, &LEVELS)
        .map_or(String::new(), |c| format!(" (did you mean `{c}`?)"));
    format!(
        "the log level `{level}` is not one of {}{close}",
        LEVELS.join(", ")
    )
}

/// Why listening on `listen` without a token is refused, if it is.
pub(super) fn exposure_problem(listen: &SocketAddr, settings: &Settings) -> Option<String> {
    (!opcode_daemon::serve::is_loopback(listen) && settings.token.is_none()).then(|| {
        format!(
            "listening on {listen} exposes the daemon to the network: set a token \
             (--token, OPCODE_TOKEN or \"token\" in settings) or listen on 127.0.0.1"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    const GOOD: &str = "0123456789abcdef0123";
    const OTHER: &str = "fedcba9876543210fedc";

    fn tokens() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            Just(None),
            Just(Some(String::new())),
            Just(Some("   ".into())),
            Just(Some(" ".repeat(20))),
            Just(Some(format!("\t{GOOD}"))),
            Just(Some(format!("{GOOD} "))),
            Just(Some("short".into())),
            Just(Some(GOOD.into())),
            Just(Some(OTHER.into())),
        ]
    }

    fn settings() -> impl Strategy<Value = Result<Settings, String>> {
        let tenants = prop_oneof![
            Just(None),
            Just(Some(json!({"acme": {"tokens": ["acme-token-0123456789"]}}))),
            Just(Some(json!({"acme": {"tokens": ["  "]}}))),
        ];
        let level = prop_oneof![
            Just(None),
            Just(Some("debug".into())),
            Just(Some("loud".into()))
        ];
        let unreadable = Just(Err("settings.json: expected value".to_owned()));
        prop_oneof![
            9 => (tokens(), tenants, level).prop_map(|(token, tenants, log_level)| Ok(Settings {
                token,
                tenants,
                log_level,
                ..Settings::default()
            })),
            1 => unreadable,
        ]
    }

    proptest! {
        /// Whatever the sequence of files read at each SIGHUP, the settings
        /// in force are always ones a start would take: a daemon off
        /// loopback never serves without a valid token.
        #[test]
        fn no_reload_sequence_applies_what_a_start_refuses(
            loopback in any::<bool>(),
            start in settings(),
            reloads in proptest::collection::vec(settings(), 1..12),
        ) {
            let listen: SocketAddr =
                if loopback { "127.0.0.1:4100" } else { "0.0.0.0:4100" }.parse().unwrap();
            let Ok(start) = start else { return Ok(()) };
            let Ok(tenants) = checked(&listen, &start) else { return Ok(()) };
            let served: Vec<Option<String>> =
                std::iter::once(None).chain(tenants.iter().map(|t| Some(t.name.clone()))).collect();
            let mut in_force = start;
            for read in reloads {
                if let Ok((settings, _)) = reloaded(read, &listen, &served) {
                    in_force = settings;
                }
                prop_assert!(checked(&listen, &in_force).is_ok());
                if !loopback {
                    prop_assert!(in_force.token.as_deref().is_some_and(|t| valid_token(t).is_ok()));
                }
            }
        }
    }

    #[test]
    fn a_token_removed_off_loopback_is_not_reloaded() {
        let listen: SocketAddr = "0.0.0.0:4100".parse().unwrap();
        let error = reloaded(Ok(Settings::default()), &listen, &[None]).unwrap_err();
        assert!(error.contains("exposes the daemon"), "{error}");
        let loopback: SocketAddr = "127.0.0.1:4100".parse().unwrap();
        assert!(reloaded(Ok(Settings::default()), &loopback, &[None]).is_ok());
    }

    #[test]
    fn tokens_with_spaces_or_control_characters_are_refused() {
        for token in [
            " ".repeat(20),
            format!("\t{GOOD}"),
            format!("{GOOD}\n"),
            format!("{GOOD} x"),
        ] {
            let settings = Settings {
                token: Some(token.clone()),
                ..Settings::default()
            };
            let listen: SocketAddr = "127.0.0.1:4100".parse().unwrap();
            assert!(checked(&listen, &settings).is_err(), "{token:?} was taken");
        }
    }
}
