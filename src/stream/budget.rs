//! The node-wide memory budget for buffered records (appended, not yet in a
//! data object). Past the limit, appends are refused with a retryable error:
//! back-pressure rather than growth.

use std::sync::atomic::{AtomicUsize, Ordering};

#[derive(Debug)]
pub struct Budget {
    limit: usize,
    used: AtomicUsize,
}

impl Budget {
    pub fn new(limit: usize) -> Self {
        Self {
            limit,
            used: AtomicUsize::new(0),
        }
    }

    /// Reserve `n` bytes, or refuse if that would pass the limit.
    pub fn try_reserve(&self, n: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                (u + n <= self.limit).then_some(u + n)
            })
            .is_ok()
    }

    pub fn release(&self, n: usize) {
        let prev = self.used.fetch_sub(n, Ordering::AcqRel);
        debug_assert!(prev >= n, "released more than reserved");
    }

    pub fn used(&self) -> usize {
        self.used.load(Ordering::Acquire)
    }

    pub fn limit(&self) -> usize {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_past_the_limit_are_refused() {
        let b = Budget::new(10);
        assert!(b.try_reserve(6));
        assert!(!b.try_reserve(5));
        assert!(b.try_reserve(4));
        b.release(6);
        assert_eq!(b.used(), 4);
        assert!(b.try_reserve(6));
    }
}
