//! Templates started by messages of a broker topic (`triggers.stream`,
//! spec/triggers-stream.md): the trigger and the settings' brokers, what a
//! broker is to the daemon ([`source::Source`]), Redis Streams, NATS
//! JetStream and Kafka, the consumer each trigger gets, and what they did.

pub mod consumer;
pub mod kafka;
pub mod nats;
pub mod probe;
pub mod redis;
pub mod source;
pub mod stats;
pub mod supervisor;
pub mod trigger;
