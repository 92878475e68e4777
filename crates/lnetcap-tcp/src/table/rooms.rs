//! The partitions of the flow table's connection limit (see
//! [`CONNECTION_PARTITIONS`]): each counts its live connections and lists candidates to
//! retire when it is full.

use std::collections::VecDeque;

use super::Entry;
use crate::limits::CONNECTION_PARTITIONS;

/// The partition of a connection whose unordered 4-tuple hashes to `route`
/// ([`super::ConnKey::route`]). A parallel run gives each share whole partitions.
#[inline]
pub fn partition_of(route: u64) -> usize {
    const { assert!(CONNECTION_PARTITIONS.is_power_of_two()) };
    (route as usize) & (CONNECTION_PARTITIONS - 1)
}

/// One partition.
#[derive(Debug, Default)]
pub(super) struct Room {
    /// Live connections.
    pub(super) live: usize,
    /// Ids of its live connections, and of some retired since `choose_idle` last pruned
    /// it (at most the candidates it chose): bounded by the partition's limit and one
    /// eighth more.
    ids: Vec<u32>,
    /// Its idlest live connections when they were last chosen, least recent first, as
    /// (frame of their latest packet then, id): retired one by one as new connections
    /// need room (see `FlowTable::make_room`); at most an eighth of the limit.
    pub(super) next: VecDeque<(u64, u32)>,
}

impl Room {
    /// Connection `id` opened here.
    pub(super) fn opened(&mut self, id: u32) {
        self.live += 1;
        self.ids.push(id);
    }

    /// Chooses the next `n` connections to retire: the idlest of the live ones, least
    /// recent packet first (ties by id, which follow first packets in any table of a
    /// parallel run too). Drops the retired from `ids` on the way.
    pub(super) fn choose_idle(&mut self, slots: &[Entry], n: usize) {
        self.ids.retain(|&i| matches!(slots[i as usize], Entry::Live(_)));
        let mut idle: Vec<(i64, u32, u64)> = self
            .ids
            .iter()
            .filter_map(|&i| match &slots[i as usize] {
                Entry::Live(s) => Some((s.info.last.ts_ns, i, s.info.last.frame)),
                _ => None,
            })
            .collect();
        let n = n.min(idle.len());
        if n == 0 {
            return;
        }
        idle.select_nth_unstable(n - 1);
        idle.truncate(n);
        idle.sort_unstable();
        self.next.extend(idle.into_iter().map(|(_, i, seen)| (seen, i)));
    }
}
