//! Asking the core to start loading bytes it will read soon (a software prefetch).
//!
//! A parallel run's worker reads each packet in a block that the reading thread's core
//! has just written: every first touch of a packet is a transfer from the other core's
//! cache, and taken one at a time these transfers cost as much as the rest of the
//! worker's work on the packet. Asked for a few packets ahead, they overlap with the
//! work on the packets before.
//!
//! Built on `map`'s one-line hint (`map` is the module allowed `unsafe`).

use crate::map::prefetch;

/// Bytes of a cache line on the targets this is built for.
const LINE: usize = 64;

/// Asks the CPU to bring in the cache lines of `bytes[..max]` (hints: nothing waits for
/// them). Does nothing on targets other than x86-64.
#[inline(always)]
pub fn prefetch_lines(bytes: &[u8], max: usize) {
    for at in line_offsets(bytes.as_ptr() as usize, bytes.len().min(max)) {
        prefetch(bytes.as_ptr().wrapping_add(at));
    }
}

/// Asks the CPU to bring in the cache line that holds `value`, if there is one (a
/// hint, as [`prefetch_lines`]): for a queue's entry that a later call reads, written so
/// long ago that it has left the cache.
#[inline(always)]
pub fn prefetch_value<T>(value: Option<&T>) {
    if let Some(v) = value {
        prefetch(std::ptr::from_ref(v).cast());
    }
}

/// Offsets, below `n`, of one byte in each cache line that the `n` bytes from address
/// `addr` touch: 0, then the first byte of each following line.
#[inline(always)]
fn line_offsets(addr: usize, n: usize) -> impl Iterator<Item = usize> {
    let second = LINE - addr % LINE;
    std::iter::once(0).chain((second..).step_by(LINE)).take_while(move |&at| at < n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every line the bytes touch gets exactly one offset, and every offset is in the bytes.
    #[test]
    fn one_offset_in_each_line_the_bytes_touch_and_none_outside() {
        for addr in [0usize, 1, 7, 63, 64, 65, 4096 + 40] {
            for n in [0usize, 1, 2, 63, 64, 65, 127, 128, 129, 200, 256, 1000] {
                let got: Vec<usize> = line_offsets(addr, n).collect();
                let lines: Vec<usize> =
                    (addr..addr + n).map(|a| a / LINE).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
                let of: Vec<usize> = got.iter().map(|at| (addr + at) / LINE).collect();
                assert_eq!(of, lines, "addr {addr} n {n}: {got:?}");
                assert!(got.iter().all(|&at| at < n), "addr {addr} n {n}: {got:?}");
            }
        }
    }
}
