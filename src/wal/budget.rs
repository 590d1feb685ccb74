//! How often one node's WAL may PUT: a token bucket.
//!
//! On a store that charges per request, a PUT per append is the bill (a
//! lone client at 200 requests/s costs about 105,000 PUTs per GiB). The
//! bucket holds up to `burst` tokens and refills at `puts_per_sec`; a
//! segment goes when a token is there, so at low load a PUT still leaves at
//! once and the lone client keeps the floor latency, while at higher load
//! appends wait for the next token and share its PUT. Two things pass
//! without a token: a segment of `bypass_bytes` or more (full, or large
//! enough that its PUT is cheap per byte: at high rates segments reach it
//! quickly, so the wait shrinks as the load grows while PUTs per GiB stay
//! near one per `bypass_bytes`) and, when a latency target is set, a
//! segment whose oldest append has waited that long (the operator asked for
//! latency over money).
//! Either still spends a token if one is there, so the budget is what the
//! rest may use.
//!
//! Pure: the caller passes the time, so the arithmetic is tested without a
//! clock.

use std::time::Duration;
use tokio::time::Instant;

/// The operator's settings (`--wal-put-rate`, `--wal-put-burst`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetConfig {
    /// Tokens added per second.
    pub puts_per_sec: f64,
    /// Tokens the bucket holds at most (and starts with).
    pub burst: u32,
    /// A segment holding at least this many bytes goes without a token
    /// (`--wal-put-bytes`; `None`: only a full segment). This keeps the
    /// budget's wait short under load: a PUT of this size is already
    /// cheap per byte, so the bucket only paces the small ones.
    pub bypass_bytes: Option<usize>,
}

impl BudgetConfig {
    /// A budget that allows something: a positive, finite rate and a burst
    /// of at least one.
    pub fn new(puts_per_sec: f64, burst: u32) -> Result<Self, String> {
        if !(puts_per_sec.is_finite() && puts_per_sec > 0.0) {
            return Err(format!("a WAL PUT rate must be a positive number, not {puts_per_sec}"));
        }
        if burst == 0 {
            return Err("a WAL PUT burst must be at least 1".into());
        }
        Ok(Self {
            puts_per_sec,
            burst,
            bypass_bytes: None,
        })
    }

    /// Let a segment of `bytes` or more go without a token (0: only a full one).
    pub fn bypass_at(self, bytes: usize) -> Self {
        Self {
            bypass_bytes: (bytes > 0).then_some(bytes),
            ..self
        }
    }

    /// Whether a segment of `bytes` goes without a token, given the
    /// writer's full size.
    pub fn bypasses(&self, bytes: usize, segment_bytes: usize) -> bool {
        bytes >= self.bypass_bytes.map_or(segment_bytes, |b| b.min(segment_bytes))
    }
}

/// The segment being filled, as the budget sees it.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    /// Bytes in it so far.
    pub bytes: usize,
    /// When its oldest append arrived.
    pub oldest: Instant,
    /// When it would go without a budget (at once, or when its linger ends).
    pub due: Instant,
}

/// The bucket's state.
#[derive(Debug, Clone)]
pub struct PutBudget {
    config: BudgetConfig,
    tokens: f64,
    at: Instant,
}

impl PutBudget {
    /// A full bucket at `now`.
    pub fn new(config: BudgetConfig, now: Instant) -> Self {
        Self {
            config,
            tokens: f64::from(config.burst),
            at: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.config.puts_per_sec).min(f64::from(self.config.burst));
        self.at = self.at.max(now);
    }

    /// When a PUT may next go without exceeding the budget (`now` if a
    /// token is there).
    pub fn ready_at(&mut self, now: Instant) -> Instant {
        self.refill(now);
        if self.tokens >= 1.0 {
            return now;
        }
        let missing = 1.0 - self.tokens;
        now + Duration::from_secs_f64(missing / self.config.puts_per_sec)
    }

    /// When the segment `p` may go: its unpaced time if it is large
    /// enough to pass without a token, else when a token is there, but
    /// never later than its oldest append plus `latency_target`.
    pub fn due(&mut self, p: Pending, segment_bytes: usize, latency_target: Option<Duration>, now: Instant) -> Instant {
        if self.config.bypasses(p.bytes, segment_bytes) {
            return p.due;
        }
        let paced = p.due.max(self.ready_at(now));
        match latency_target {
            Some(target) => paced.min((p.oldest + target).max(p.due)),
            None => paced,
        }
    }

    /// A PUT goes at `now`: spend a token if there is one (a PUT that
    /// passed without one, full or overdue, leaves the bucket empty rather
    /// than in debt).
    pub fn spend(&mut self, now: Instant) {
        self.refill(now);
        self.tokens = (self.tokens - 1.0).max(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(rate: f64, burst: u32) -> (PutBudget, Instant) {
        let now = Instant::now();
        (PutBudget::new(BudgetConfig::new(rate, burst).unwrap(), now), now)
    }

    #[test]
    fn a_full_bucket_lets_a_burst_go_at_once_then_paces() {
        let (mut b, t0) = budget(4.0, 3);
        for _ in 0..3 {
            assert_eq!(b.ready_at(t0), t0);
            b.spend(t0);
        }
        // Empty: the next token is a quarter second away.
        assert_eq!(b.ready_at(t0), t0 + Duration::from_millis(250));
        let t1 = t0 + Duration::from_millis(250);
        assert_eq!(b.ready_at(t1), t1);
        b.spend(t1);
        assert_eq!(
            b.ready_at(t1 + Duration::from_millis(100)),
            t1 + Duration::from_millis(250)
        );
    }

    #[test]
    fn an_idle_bucket_fills_to_its_burst_and_no_more() {
        let (mut b, t0) = budget(10.0, 2);
        b.spend(t0);
        b.spend(t0);
        let later = t0 + Duration::from_secs(3600);
        for _ in 0..2 {
            assert_eq!(b.ready_at(later), later);
            b.spend(later);
        }
        assert!(b.ready_at(later) > later, "only two tokens were kept");
    }

    #[test]
    fn puts_that_pass_without_a_token_leave_no_debt() {
        let (mut b, t0) = budget(1.0, 1);
        b.spend(t0);
        // Full segments passing while the bucket is empty.
        for _ in 0..10 {
            b.spend(t0);
        }
        assert_eq!(b.ready_at(t0), t0 + Duration::from_secs(1));
    }

    #[test]
    fn over_a_long_run_the_rate_is_the_budget() {
        let (mut b, t0) = budget(5.0, 1);
        let mut now = t0;
        let mut puts = 0;
        let end = t0 + Duration::from_secs(60);
        while now < end {
            now = b.ready_at(now);
            b.spend(now);
            puts += 1;
        }
        // 1 initial token + 5/s for 60 s.
        assert!((300..=302).contains(&puts), "{puts}");
    }

    #[test]
    fn a_budget_must_allow_something() {
        assert!(BudgetConfig::new(0.0, 1).is_err());
        assert!(BudgetConfig::new(-1.0, 1).is_err());
        assert!(BudgetConfig::new(f64::NAN, 1).is_err());
        assert!(BudgetConfig::new(f64::INFINITY, 1).is_err());
        assert!(BudgetConfig::new(1.0, 0).is_err());
        assert!(BudgetConfig::new(0.5, 1).is_ok());
    }

    #[test]
    fn a_segment_past_the_bypass_size_needs_no_token() {
        let plain = BudgetConfig::new(1.0, 1).unwrap();
        assert!(
            !plain.bypasses(1 << 20, 8 << 20),
            "without a bypass only a full segment passes"
        );
        assert!(plain.bypasses(8 << 20, 8 << 20));
        let sized = plain.bypass_at(1 << 20);
        assert!(!sized.bypasses((1 << 20) - 1, 8 << 20));
        assert!(sized.bypasses(1 << 20, 8 << 20));
        // Never above the full size.
        assert!(plain.bypass_at(64 << 20).bypasses(8 << 20, 8 << 20));
        assert_eq!(plain.bypass_at(0), plain);
    }

    #[test]
    fn a_segment_is_due_at_its_linger_or_its_token_bounded_by_the_target() {
        let t0 = Instant::now();
        let mut b = PutBudget::new(BudgetConfig::new(1.0, 1).unwrap().bypass_at(1 << 20), t0);
        b.spend(t0);
        let small = |due| Pending {
            bytes: 100,
            oldest: t0,
            due,
        };
        let linger = t0 + Duration::from_millis(5);
        // Empty bucket: the next token, a second away.
        assert_eq!(
            b.clone().due(small(linger), 8 << 20, None, t0),
            t0 + Duration::from_secs(1)
        );
        // The target caps the wait, but never before the linger ends.
        let target = Some(Duration::from_millis(200));
        assert_eq!(
            b.clone().due(small(linger), 8 << 20, target, t0),
            t0 + Duration::from_millis(200)
        );
        let late = t0 + Duration::from_millis(300);
        assert_eq!(b.clone().due(small(late), 8 << 20, target, t0), late);
        // Large enough to pass: its own time, bucket or not.
        let big = Pending {
            bytes: 1 << 20,
            ..small(linger)
        };
        assert_eq!(b.due(big, 8 << 20, None, t0), linger);
    }
}
