//! The brokers of the settings (spec/triggers-stream.md): each answers,
//! or the check fails naming it.

use opcode_daemon::settings::Settings;
use opcode_daemon::stream::probe;
use opcode_daemon::stream::trigger::{BrokerKind, Brokers};

use super::Check;

/// One check for every broker of the settings; none without brokers.
pub async fn checks(settings: &Settings) -> Vec<Check> {
    let brokers = match Brokers::parse(settings.brokers.as_ref()) {
        Ok(brokers) if brokers.0.is_empty() => return Vec::new(),
        Ok(brokers) => brokers,
        Err(e) => {
            return vec![Check::fail(
                "brokers",
                e,
                "correct `brokers` in the settings",
            )];
        }
    };
    let mut found = Vec::new();
    let mut unreachable = Vec::new();
    for (name, broker) in &brokers.0 {
        let kind = match broker.kind {
            BrokerKind::Redis(_) => "redis",
            BrokerKind::Nats(_) => "nats",
            BrokerKind::Kafka(_) => "kafka",
        };
        match probe::answers(&broker.kind).await {
            Ok(running) => found.push(format!("{name}: {running}")),
            Err(why) => unreachable.push(format!("{name} ({kind}): {why}")),
        }
    }
    if unreachable.is_empty() {
        return vec![Check::ok("brokers", found.join("; "))];
    }
    vec![Check::fail(
        "brokers",
        format!("cannot reach {}", unreachable.join("; ")),
        "start the broker, or correct its address in the settings' `brokers`: templates reading it \
         start no runs meanwhile",
    )]
}
