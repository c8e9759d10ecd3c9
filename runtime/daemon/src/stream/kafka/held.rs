//! The messages a Kafka member has read and not acknowledged, by
//! partition, and the offset each partition may commit: the lowest one
//! still held, else the one after the newest read. A message whose run did
//! not start stays held, so no commit passes it, and is given again by
//! [`Held::due`] after the trigger's `claim_after`.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use super::super::source::Message;

/// What one member holds.
#[derive(Debug, Default)]
pub struct Held {
    partitions: HashMap<i32, Partition>,
}

#[derive(Debug, Default)]
struct Partition {
    /// The offset after the newest message read.
    next: i64,
    /// The offset last committed (or asked to be).
    committed: i64,
    /// Messages read and not acknowledged, by offset, with when they were
    /// last given.
    open: BTreeMap<i64, (Message, Instant)>,
}

impl Partition {
    fn commit_point(&self) -> i64 {
        self.open.keys().next().copied().unwrap_or(self.next)
    }
}

impl Held {
    /// `message`, at `offset` of `partition`, was read at `now`.
    pub fn read(&mut self, partition: i32, offset: i64, message: Message, now: Instant) {
        let part = self
            .partitions
            .entry(partition)
            .or_insert_with(|| Partition {
                next: offset,
                committed: offset,
                open: BTreeMap::new(),
            });
        part.next = part.next.max(offset + 1);
        part.open.insert(offset, (message, now));
    }

    /// The message at `offset` of `partition` is done; false when it was
    /// not held (its partition went to another member since).
    pub fn ack(&mut self, partition: i32, offset: i64) -> bool {
        self.partitions
            .get_mut(&partition)
            .and_then(|part| part.open.remove(&offset))
            .is_some()
    }

    /// Up to `count` messages held `idle` or longer, oldest first, given
    /// again as of `now`.
    pub fn due(&mut self, idle: Duration, count: usize, now: Instant) -> Vec<Message> {
        let mut due: Vec<(Instant, i32, i64)> = self
            .partitions
            .iter()
            .flat_map(|(p, part)| part.open.iter().map(move |(o, (_, at))| (*at, *p, *o)))
            .filter(|(at, _, _)| now.saturating_duration_since(*at) >= idle)
            .collect();
        due.sort_unstable();
        due.truncate(count);
        due.into_iter()
            .filter_map(|(_, p, o)| {
                let (message, at) = self.partitions.get_mut(&p)?.open.get_mut(&o)?;
                *at = now;
                Some(message.clone())
            })
            .collect()
    }

    /// The offsets that may be committed and were not yet, as
    /// `(partition, offset)`: each is then taken as committed. `only`
    /// narrows it to some partitions.
    pub fn take_commits(&mut self, only: Option<&[i32]>) -> Vec<(i32, i64)> {
        let mut out: Vec<(i32, i64)> = self
            .partitions
            .iter_mut()
            .filter(|(p, _)| only.is_none_or(|only| only.contains(p)))
            .filter_map(|(p, part)| {
                let point = part.commit_point();
                (point > part.committed).then(|| {
                    part.committed = point;
                    (*p, point)
                })
            })
            .collect();
        out.sort_unstable();
        out
    }

    /// A commit of `partition` failed: its commit point is asked again by
    /// the next [`Held::take_commits`].
    pub fn retry(&mut self, partition: i32) {
        if let Some(part) = self.partitions.get_mut(&partition) {
            part.committed = -1;
        }
    }

    /// `partition` went to another member: what it held is its now.
    pub fn forget(&mut self, partition: i32) {
        self.partitions.remove(&partition);
    }

    /// How many messages are held.
    pub fn count(&self) -> usize {
        self.partitions.values().map(|p| p.open.len()).sum()
    }
}

/// A Kafka message's position, `partition:offset`.
pub fn position(partition: i32, offset: i64) -> String {
    format!("{partition}:{offset}")
}

/// The partition and offset of `position`.
pub fn parse(position: &str) -> Option<(i32, i64)> {
    let (partition, offset) = position.split_once(':')?;
    Some((partition.parse().ok()?, offset.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(at: &str) -> Message {
        Message {
            position: at.to_owned(),
            fields: BTreeMap::new(),
        }
    }

    #[test]
    fn a_commit_never_passes_a_message_still_held() {
        let now = Instant::now();
        let mut held = Held::default();
        for offset in 10..14 {
            held.read(0, offset, message(&position(0, offset)), now);
        }
        assert_eq!(
            held.take_commits(None),
            Vec::new(),
            "nothing acknowledged yet"
        );
        assert!(held.ack(0, 10));
        assert!(held.ack(0, 12), "acknowledged out of order");
        assert_eq!(held.take_commits(None), vec![(0, 11)], "11 is still held");
        assert_eq!(held.take_commits(None), Vec::new(), "asked once");
        assert!(held.ack(0, 11));
        assert!(held.ack(0, 13));
        assert_eq!(held.take_commits(None), vec![(0, 14)]);
        assert_eq!(held.count(), 0);
        held.retry(0);
        assert_eq!(
            held.take_commits(None),
            vec![(0, 14)],
            "a failed commit asked again"
        );
    }

    #[test]
    fn a_message_left_unacknowledged_is_given_again_after_idle() {
        let start = Instant::now();
        let mut held = Held::default();
        held.read(2, 5, message("2:5"), start);
        held.read(1, 7, message("1:7"), start + Duration::from_secs(1));
        let idle = Duration::from_secs(30);
        assert!(
            held.due(idle, 10, start + Duration::from_secs(29))
                .is_empty()
        );
        let again = held.due(idle, 10, start + Duration::from_millis(30_500));
        assert_eq!(again, vec![message("2:5")]);
        let later = start + Duration::from_secs(32);
        assert_eq!(held.due(idle, 10, later), vec![message("1:7")]);
        assert!(held.due(idle, 10, later).is_empty(), "given again just now");
    }

    #[test]
    fn a_partition_taken_away_is_forgotten_and_its_acks_are_refused() {
        let now = Instant::now();
        let mut held = Held::default();
        held.read(0, 1, message("0:1"), now);
        held.read(1, 1, message("1:1"), now);
        held.forget(1);
        assert!(!held.ack(1, 1));
        assert!(held.ack(0, 1));
        assert_eq!(held.take_commits(Some(&[1])), Vec::new());
        assert_eq!(held.take_commits(Some(&[0])), vec![(0, 2)]);
    }

    #[test]
    fn positions_read_back() {
        assert_eq!(parse(&position(3, 1042)), Some((3, 1042)));
        assert_eq!(parse("3-1042"), None);
        assert_eq!(parse("x:1"), None);
    }
}
