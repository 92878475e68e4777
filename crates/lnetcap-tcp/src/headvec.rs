//! A first-in first-out queue kept in a vector read from a head index: its dropped front
//! is compacted away once it is at least `KEEP` items and half the vector (amortised; at
//! most twice the live items plus `KEEP`). Against a `VecDeque`, a queue that is mostly
//! pushed at the back and popped at the front costs fewer instructions (no wrapping to
//! handle), and an insertion a few places from the back is one short move. The stream
//! history's ranges are the same queue written out (`stream::Ranges`, which says why).

/// See the module's comment.
#[derive(Debug, Clone)]
pub struct HeadVec<T, const KEEP: usize> {
    v: Vec<T>,
    head: usize,
}

impl<T, const KEEP: usize> Default for HeadVec<T, KEEP> {
    fn default() -> Self {
        Self { v: Vec::new(), head: 0 }
    }
}

impl<T, const KEEP: usize> HeadVec<T, KEEP> {
    /// The items in the queue, front first.
    pub fn live(&self) -> &[T] {
        &self.v[self.head..]
    }

    /// The front item.
    pub fn front(&self) -> Option<&T> {
        self.v.get(self.head)
    }

    /// Appends an item at the back.
    pub fn push_back(&mut self, x: T) {
        self.v.push(x);
    }

    /// Inserts an item `i` places from the front (`i` at most the live items).
    pub fn insert(&mut self, i: usize, x: T) {
        self.v.insert(self.head + i, x);
    }

    /// Drops the front item, if any.
    pub fn pop_front(&mut self) {
        self.head += 1;
        if self.head >= self.v.len() {
            self.v.clear();
            self.head = 0;
        } else if self.head >= KEEP && 2 * self.head >= self.v.len() {
            self.v.drain(..self.head);
            self.head = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::HeadVec;

    #[test]
    fn queues_in_order_and_compacts() {
        let mut r = HeadVec::<u64, 64>::default();
        for i in 0..200u64 {
            r.push_back(i);
        }
        for i in 0..150u64 {
            assert_eq!(r.front().copied(), Some(i));
            r.pop_front();
        }
        // Compacted once half was dropped: what is left starts at the front.
        assert_eq!(r.live().len(), 50);
        assert!(r.v.len() < 200);
        assert_eq!(r.front().copied(), Some(150));
        r.insert(1, 1000);
        assert_eq!(&r.live()[..3], &[150, 1000, 151]);
        assert_eq!(r.live().last(), Some(&199));
        for _ in 0..51 {
            r.pop_front();
        }
        assert_eq!(r.front(), None);
        assert_eq!(r.v.len(), 0);
        r.pop_front();
        assert_eq!(r.v.len(), 0);
    }
}
