//! The floor: bare create-if-absent PUTs of one size to a store, the least
//! any acknowledged append can cost.

use super::report::Percentiles;
use super::FloorArgs;
use std::time::Instant;

pub(super) async fn floor(args: &FloorArgs) -> anyhow::Result<()> {
    let s3 = crate::store::s3::S3Options {
        endpoint: args.s3_endpoint.clone(),
        region: args.s3_region.clone(),
        force_path_style: args.s3_endpoint.is_some(),
    };
    let store = crate::store::open_url(&args.store, &s3).await?;
    let body = bytes::Bytes::from(vec![b'f'; args.object_bytes]);
    let run = format!("bench-floor/{:016x}", rand::random::<u64>());
    let mut lat = Vec::with_capacity(args.count);
    for i in 0..args.count {
        let t = Instant::now();
        store.put_if_absent(&format!("{run}/{i:08}"), body.clone()).await?;
        lat.push(t.elapsed());
    }
    for i in 0..args.count {
        store.delete(&format!("{run}/{i:08}")).await?;
    }
    let p = Percentiles::of(&mut lat);
    if args.json {
        println!(
            "{}",
            serde_json::json!({"mode": "floor", "object_bytes": args.object_bytes, "count": args.count, "latency_ms": p})
        );
    } else {
        println!(
            "floor: {} create-if-absent PUTs of {} bytes to {}: latency ms p50 {:.2} p90 {:.2} p99 {:.2} max {:.2}",
            args.count, args.object_bytes, args.store, p.p50, p.p90, p.p99, p.max
        );
    }
    Ok(())
}
