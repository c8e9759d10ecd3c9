//! Whether a broker of the settings answers (for `opcode doctor`): a
//! Redis `PING`, a NATS connection with JetStream, a Kafka cluster's
//! metadata; what it runs, or why not.

use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer as _};
use redis::{AsyncConnectionConfig, Client};

use super::trigger::BrokerKind;

/// How long a broker may take to answer.
const WAIT: Duration = Duration::from_secs(5);

/// What `broker` runs (`redis 7.0.15`, `nats 2.9.10 with JetStream`), or
/// why it cannot be reached.
pub async fn answers(broker: &BrokerKind) -> Result<String, String> {
    match broker {
        BrokerKind::Redis(url) => redis(url).await,
        BrokerKind::Nats(url) => nats(url).await,
        BrokerKind::Kafka(servers) => kafka(servers).await,
    }
}

async fn kafka(servers: &str) -> Result<String, String> {
    let servers = servers.to_owned();
    let asked = tokio::task::spawn_blocking(move || {
        let client: BaseConsumer = super::kafka::config(&servers)
            .create()
            .map_err(|e| e.to_string())?;
        let metadata = client
            .fetch_metadata(None, WAIT)
            .map_err(|e| e.to_string())?;
        Ok(format!(
            "kafka with {} broker(s), {} topic(s)",
            metadata.brokers().len(),
            metadata.topics().len()
        ))
    });
    asked.await.map_err(|e| e.to_string())?
}

async fn redis(url: &str) -> Result<String, String> {
    let client = Client::open(url).map_err(|e| e.to_string())?;
    let config = AsyncConnectionConfig::new()
        .set_connection_timeout(Some(WAIT))
        .set_response_timeout(Some(WAIT));
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|e| e.to_string())?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut conn)
        .await
        .map_err(|e| e.to_string())?;
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("?");
    Ok(format!("redis {}", version.trim()))
}

async fn nats(url: &str) -> Result<String, String> {
    let client = async_nats::ConnectOptions::new()
        .connection_timeout(WAIT)
        .connect(url)
        .await
        .map_err(|e| e.to_string())?;
    let version = client.server_info().version;
    // JetStream's account info: answered when JetStream is on.
    let asked = tokio::time::timeout(WAIT, client.request("$JS.API.INFO", "".into())).await;
    let answer: serde_json::Value = match asked {
        Ok(Ok(reply)) => serde_json::from_slice(&reply.payload).unwrap_or_default(),
        Ok(Err(e)) => {
            return Err(format!(
                "nats {version} without JetStream ({e}): start it with -js"
            ));
        }
        Err(_) => return Err(format!("nats {version}: JetStream did not answer")),
    };
    match answer.get("error") {
        None => Ok(format!("nats {version} with JetStream")),
        Some(error) => Err(format!("nats {version}: JetStream refused: {error}")),
    }
}
