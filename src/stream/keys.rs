//! Names of data objects: `data/<yyyy>/<mm>/<dd>/<node>-<epoch>-<ulid>.obj`.

use crate::ids::{NodeEpoch, NodeId};

const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// A ULID: 48 bits of milliseconds then 80 random bits, Crockford base32.
pub fn ulid(now_ms: u64, random: u128) -> String {
    let value: u128 = (u128::from(now_ms & ((1 << 48) - 1)) << 80) | (random & ((1u128 << 80) - 1));
    (0..26)
        .rev()
        .map(|i| CROCKFORD[((value >> (i * 5)) & 31) as usize] as char)
        .collect()
}

/// (year, month, day) of a day count since 1970-01-01 (Howard Hinnant's algorithm).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A new data object's key, named at `now_ms` (wall time, read through the
/// writer's [`Clock`](crate::clock::Clock)).
pub fn data_object_key(node: &NodeId, epoch: NodeEpoch, now_ms: i64) -> String {
    let now_ms = u64::try_from(now_ms).unwrap_or(0);
    let (y, m, d) = civil_from_days((now_ms / 86_400_000) as i64);
    format!(
        "data/{y:04}/{m:02}/{d:02}/{node}-{}-{}.obj",
        epoch.0,
        ulid(now_ms, crate::entropy::random())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_are_right() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_423), (2025, 12, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn ulids_sort_by_time_and_use_crockford_base32() {
        let a = ulid(1, u128::MAX);
        let b = ulid(2, 0);
        assert_eq!(a.len(), 26);
        assert!(a < b);
        assert_eq!(ulid(0, 0), "00000000000000000000000000");
        assert!(a.chars().all(|c| CROCKFORD.contains(&(c as u8))));
    }

    #[test]
    fn data_object_keys_are_valid_store_keys() {
        let k = data_object_key(&NodeId::new("n1"), NodeEpoch(3), 1_704_067_200_000);
        assert!(crate::store::validate_key(&k).is_ok(), "{k}");
        assert!(k.starts_with("data/2024/01/01/") && k.contains("/n1-3-") && k.ends_with(".obj"));
    }
}
