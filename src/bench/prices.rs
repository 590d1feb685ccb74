//! What requests cost: list prices per request, in one table, named with
//! the date they were read, and the arithmetic from a run's request counts
//! to dollars per GiB written.
//!
//! Prices are AWS list prices for us-east-1 as published in December 2026
//! (unchanged since the S3 Express One Zone price cut of April 2025).
//! Storage, bandwidth and S3 Express's per-GB upload and retrieval charges
//! are left out: the report is about requests, which is what a
//! write-ahead log on an object store multiplies.

use serde::Serialize;
use std::collections::BTreeMap;

/// When the prices below were read.
pub const PRICES_AS_OF: &str = "2026-12 (AWS list prices, us-east-1)";

/// Dollars per request of each kind on one object-store class.
#[derive(Debug, Clone, Copy)]
pub struct ObjectStorePrices {
    pub name: &'static str,
    /// PUT, COPY, POST and LIST.
    pub put: f64,
    /// GET and every other request; DELETE is free on both classes.
    pub get: f64,
}

pub const S3_STANDARD: ObjectStorePrices = ObjectStorePrices {
    name: "s3_standard",
    put: 0.005 / 1000.0,
    get: 0.0004 / 1000.0,
};

pub const S3_EXPRESS_ONE_ZONE: ObjectStorePrices = ObjectStorePrices {
    name: "s3_express_one_zone",
    put: 0.00113 / 1000.0,
    get: 0.00003 / 1000.0,
};

/// DynamoDB on-demand, dollars per capacity unit.
pub const DYNAMODB_WRITE_UNIT: f64 = 0.625 / 1e6;
pub const DYNAMODB_READ_UNIT: f64 = 0.125 / 1e6;

/// Requests of one run, by `store` (wal, data, meta) and `op` (put, get,
/// get_range, list, delete), plus DynamoDB capacity units by kind.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Requests {
    pub objects: BTreeMap<String, BTreeMap<String, f64>>,
    pub dynamodb_write_units: f64,
    pub dynamodb_read_units: f64,
}

impl Requests {
    /// `after - before`, per counter.
    pub fn since(&self, before: &Requests) -> Requests {
        let mut objects = BTreeMap::new();
        for (store, ops) in &self.objects {
            let mut out = BTreeMap::new();
            for (op, n) in ops {
                let was = before
                    .objects
                    .get(store)
                    .and_then(|o| o.get(op))
                    .copied()
                    .unwrap_or(0.0);
                let d = (n - was).max(0.0);
                if d > 0.0 {
                    out.insert(op.clone(), d);
                }
            }
            if !out.is_empty() {
                objects.insert(store.clone(), out);
            }
        }
        Requests {
            objects,
            dynamodb_write_units: (self.dynamodb_write_units - before.dynamodb_write_units).max(0.0),
            dynamodb_read_units: (self.dynamodb_read_units - before.dynamodb_read_units).max(0.0),
        }
    }

    fn count(&self, store: Option<&str>, ops: &[&str]) -> f64 {
        self.objects
            .iter()
            .filter(|(s, _)| store.is_none_or(|want| want == s.as_str()))
            .flat_map(|(_, o)| o.iter())
            .filter(|(op, _)| ops.contains(&op.as_str()))
            .map(|(_, n)| n)
            .sum()
    }

    /// Dollars these requests cost on `prices` (object stores) plus DynamoDB.
    pub fn dollars(&self, prices: &ObjectStorePrices) -> f64 {
        self.count(None, &["put", "list"]) * prices.put
            + self.count(None, &["get", "get_range"]) * prices.get
            + self.dynamodb_write_units * DYNAMODB_WRITE_UNIT
            + self.dynamodb_read_units * DYNAMODB_READ_UNIT
    }
}

/// The cost report of one run: requests per GiB of record bytes, and what
/// they cost at list prices.
#[derive(Debug, Clone, Serialize)]
pub struct Cost {
    pub prices_as_of: &'static str,
    /// Every request counted during the run, by store and operation.
    pub requests: Requests,
    pub wal_puts_per_gib: f64,
    pub data_puts_per_gib: f64,
    /// Every object-store request (any store, any operation) per GiB.
    pub requests_per_gib: f64,
    /// Dollars per GiB on each object-store class (requests only).
    pub dollars_per_gib: BTreeMap<&'static str, f64>,
}

impl Cost {
    /// `bytes` of record values moved (written, or read for `consume`).
    pub fn of(requests: Requests, bytes: u64) -> Option<Cost> {
        if bytes == 0 {
            return None;
        }
        let gib = bytes as f64 / (1u64 << 30) as f64;
        let all: f64 = requests.objects.values().flat_map(|o| o.values()).sum();
        let dollars_per_gib = [S3_STANDARD, S3_EXPRESS_ONE_ZONE]
            .iter()
            .map(|p| (p.name, requests.dollars(p) / gib))
            .collect();
        Some(Cost {
            prices_as_of: PRICES_AS_OF,
            wal_puts_per_gib: requests.count(Some("wal"), &["put"]) / gib,
            data_puts_per_gib: requests.count(Some("data"), &["put"]) / gib,
            requests_per_gib: all / gib,
            dollars_per_gib,
            requests,
        })
    }
}

/// The request counters in Prometheus text: sums of
/// `sluice_object_store_requests_total` over outcomes (a failed request is
/// billed too), and `sluice_meta_capacity_units_total` by kind.
pub fn parse_requests(text: &str) -> Requests {
    let mut r = Requests::default();
    for line in text.lines() {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(v) = value.parse::<f64>() else { continue };
        let Some((name, labels)) = series.split_once('{') else {
            continue;
        };
        let label = |k: &str| {
            labels
                .trim_end_matches('}')
                .split(',')
                .find_map(|kv| kv.strip_prefix(k)?.strip_prefix("=\"")?.strip_suffix('"'))
        };
        match name {
            "sluice_object_store_requests_total" => {
                if let (Some(store), Some(op)) = (label("store"), label("op")) {
                    *r.objects
                        .entry(store.to_string())
                        .or_default()
                        .entry(op.to_string())
                        .or_default() += v;
                }
            }
            "sluice_meta_capacity_units_total" => match label("kind") {
                Some("write") => r.dynamodb_write_units += v,
                Some("read") => r.dynamodb_read_units += v,
                _ => {}
            },
            _ => {}
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The console's cost chart (`src/http/ui/app.js`) prices requests with
    /// its own copy of this table: they must agree.
    #[test]
    fn the_console_prices_requests_as_this_table_does() {
        let js = include_str!("../http/ui/app.js");
        let line = js
            .lines()
            .find(|l| l.starts_with("const PRICE = "))
            .expect("PRICE in app.js");
        let price = |key: &str| -> f64 {
            let at = line
                .find(&format!("{key}: "))
                .unwrap_or_else(|| panic!("{key} in {line}"))
                + key.len()
                + 2;
            let expr: String = line[at..].chars().take_while(|c| *c != ',' && *c != '}').collect();
            let (a, b) = expr.split_once('/').expect("a / b");
            a.trim().parse::<f64>().unwrap() / b.trim().parse::<f64>().unwrap()
        };
        for (key, want) in [
            ("put", S3_STANDARD.put),
            ("get", S3_STANDARD.get),
            ("ddbWrite", DYNAMODB_WRITE_UNIT),
            ("ddbRead", DYNAMODB_READ_UNIT),
        ] {
            let got = price(key);
            assert!((got - want).abs() <= want * 1e-12, "{key}: console {got}, table {want}");
        }
    }

    const TEXT: &str = "\
sluice_object_store_requests_total{store=\"wal\",op=\"put\",outcome=\"ok\"} 1000
sluice_object_store_requests_total{store=\"wal\",op=\"put\",outcome=\"error\"} 24
sluice_object_store_requests_total{store=\"wal\",op=\"delete\",outcome=\"ok\"} 990
sluice_object_store_requests_total{store=\"data\",op=\"put\",outcome=\"ok\"} 10
sluice_object_store_requests_total{store=\"data\",op=\"get_range\",outcome=\"ok\"} 100
sluice_object_store_requests_total{store=\"meta\",op=\"get\",outcome=\"ok\"} 2000
sluice_meta_capacity_units_total{op=\"PutItem\",kind=\"write\"} 40
sluice_meta_capacity_units_total{op=\"Query\",kind=\"read\"} 8
sluice_http_requests_total{route=\"x\"} 5
";

    #[test]
    fn request_counters_are_summed_over_outcomes() {
        let r = parse_requests(TEXT);
        assert_eq!(r.objects["wal"]["put"], 1024.0, "failed requests are billed too");
        assert_eq!(r.objects["wal"]["delete"], 990.0);
        assert_eq!(r.objects["meta"]["get"], 2000.0);
        assert_eq!((r.dynamodb_write_units, r.dynamodb_read_units), (40.0, 8.0));
        let d = r.since(&Requests::default());
        assert_eq!(d, r);
        assert_eq!(r.since(&r).objects, BTreeMap::new(), "nothing moved, nothing left");
    }

    #[test]
    fn dollars_follow_the_price_table() {
        let r = parse_requests(TEXT);
        // PUTs and LISTs: 1034; GETs: 2100; DELETEs free.
        let standard = 1034.0 * 0.005 / 1000.0 + 2100.0 * 0.0004 / 1000.0 + 40.0 * 0.625e-6 + 8.0 * 0.125e-6;
        assert!((r.dollars(&S3_STANDARD) - standard).abs() < 1e-12);
        let gib = 1u64 << 30;
        let c = Cost::of(r, 2 * gib).unwrap();
        assert_eq!(c.wal_puts_per_gib, 512.0);
        assert_eq!(c.data_puts_per_gib, 5.0);
        assert_eq!(c.requests_per_gib, (1024.0 + 990.0 + 10.0 + 100.0 + 2000.0) / 2.0);
        assert!((c.dollars_per_gib["s3_standard"] - standard / 2.0).abs() < 1e-12);
        assert!(c.dollars_per_gib["s3_express_one_zone"] < c.dollars_per_gib["s3_standard"]);
        assert!(Cost::of(Requests::default(), 0).is_none());
    }
}
