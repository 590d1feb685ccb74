//! Randomness that is not a secret (proposal ids, data-object names, member
//! ids, fetch-session ids), drawn through one place so that a test can make
//! it reproducible: [`seed_this_thread`] gives the calling thread its own
//! seeded generator, and every draw on that thread comes from it. Threads
//! never seeded draw from the operating system's generator, as production
//! does. The deterministic simulation runs each seed on one thread (a
//! current-thread runtime), so seeding that thread makes the run's draws a
//! function of the seed.
//!
//! Secrets (tokens, SCRAM salts and nonces, the peer key) never come from
//! here: they are drawn from the operating system directly.

use rand::distr::{Distribution, StandardUniform};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::cell::RefCell;

thread_local! {
    static SEEDED: RefCell<Option<SmallRng>> = const { RefCell::new(None) };
}

/// From now on, draws on this thread come from a generator seeded with
/// `seed`; `None` returns the thread to the operating system's generator.
pub fn seed_this_thread(seed: Option<u64>) {
    SEEDED.with(|s| *s.borrow_mut() = seed.map(SmallRng::seed_from_u64));
}

/// A random value: from this thread's seeded generator, if it has one.
pub fn random<T>() -> T
where
    StandardUniform: Distribution<T>,
{
    SEEDED.with(|s| match &mut *s.borrow_mut() {
        Some(rng) => rng.random(),
        None => rand::random(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seeded_thread_draws_the_same_values_again() {
        std::thread::spawn(|| {
            seed_this_thread(Some(7));
            let a: [u64; 4] = [random(), random(), random(), random()];
            seed_this_thread(Some(7));
            let b: [u64; 4] = [random(), random(), random(), random()];
            assert_eq!(a, b);
            seed_this_thread(Some(8));
            assert_ne!(a[0], random::<u64>());
            seed_this_thread(None);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn an_unseeded_thread_draws_from_the_system() {
        std::thread::spawn(|| {
            let a: [u64; 2] = [random(), random()];
            assert_ne!(a[0], a[1]);
        })
        .join()
        .unwrap();
    }
}
