//! `PUT` (create, idempotent), `HEAD` (metadata) and `DELETE`.

use super::fork::{self, ForkRequest};
use super::headers::{self as h, media_type, Lifetime};
use super::offset::{token, Start};
use super::reply::{no_store, DsError, Reply};
use super::stream::{self, Lookup};
use super::time::format_rfc3339;
use super::{append, json, DsState};
use crate::api::Consistency;
use crate::api::{ErrorCode, ReadFrom};
use crate::ids::Offset;
use crate::meta::durable::{DurableMeta, DurableUpdate, ForkOf};
use crate::meta::TopicConfig;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use std::time::Duration;

/// Whether an existing stream was created with the same configuration:
/// content type (a fork may leave it out), lifetime (a fork that was given
/// none copied its source's), and for a fork the same source and offsets.
fn same_config(
    meta: &DurableMeta,
    content_type: Option<&str>,
    life: &Lifetime,
    fork_req: Option<(&str, &ForkRequest)>,
) -> bool {
    let inherits = fork_req.is_some();
    let ct = match content_type {
        Some(ct) => media_type(&meta.content_type) == media_type(ct),
        None => inherits || media_type(&meta.content_type) == h::DEFAULT_CONTENT_TYPE,
    };
    let no_life = life.ttl_secs.is_none() && life.expires_at_ms.is_none();
    let inherited_life = meta.fork.as_ref().is_some_and(|f| f.inherited_lifetime);
    let lifetime = if inherits && no_life {
        inherited_life
    } else {
        !inherited_life && meta.ttl_secs == life.ttl_secs && meta.expires_at_ms == life.expires_at_ms
    };
    ct && lifetime && fork::same_fork(meta.fork.as_deref(), fork_req)
}

/// The messages of a create's initial body.
fn initial_records(body: Bytes, content_type: &str, max: usize) -> Result<Vec<Bytes>, DsError> {
    if body.is_empty() {
        return Ok(Vec::new());
    }
    if !json::is_json(content_type) {
        return Ok(vec![body]);
    }
    match json::messages(&body, max) {
        Ok(m) => Ok(m),
        Err(json::JsonError::EmptyArray) => Ok(Vec::new()),
        Err(json::JsonError::TooMany(max)) => Err(json::too_many(max)),
        Err(json::JsonError::Invalid(e)) => Err(DsError::bad(format!("body is not JSON: {e}"))),
    }
}

/// What a new fork starts from: its content type and lifetime (the
/// source's unless given) and where it forks.
struct ForkPlan {
    content_type: String,
    life: Lifetime,
    fork: ForkOf,
}

async fn plan_fork(
    st: &DsState,
    req: &ForkRequest,
    content_type: Option<&str>,
    life: Lifetime,
) -> Result<ForkPlan, DsError> {
    let source_topic = stream::topic(&req.source)?;
    let src = match stream::lookup(st, &req.source).await? {
        Lookup::Found(f) => f,
        Lookup::Gone => {
            return Err(DsError::conflict(format!(
                "stream {:?} was deleted; it cannot be forked",
                req.source
            )))
        }
        Lookup::Foreign | Lookup::Expired | Lookup::Missing => return Err(DsError::not_found(&req.source)),
    };
    if let Some(ct) = content_type {
        if media_type(ct) != media_type(&src.meta.content_type) {
            return Err(DsError::conflict(format!(
                "a fork has its source's content type, {}, not {ct}",
                src.meta.content_type
            )));
        }
    }
    let inherited_lifetime = life.ttl_secs.is_none() && life.expires_at_ms.is_none();
    let life = if inherited_lifetime {
        Lifetime {
            ttl_secs: src.meta.ttl_secs,
            expires_at_ms: src.meta.expires_at_ms,
        }
    } else {
        life
    };
    let src_tail = stream::tail(st, &src).await?;
    let at = match req.offset {
        None | Some(Start::Now) => src_tail,
        Some(Start::Beginning) => Offset::ZERO,
        Some(Start::At(o)) => o,
    };
    if at > src_tail {
        return Err(DsError::bad(format!(
            "Stream-Fork-Offset {} is past the end of {:?} ({})",
            token(at),
            req.source,
            token(src_tail)
        )));
    }
    let sub = req.sub_offset;
    let (offset, partial) = if sub == 0 {
        (at, None)
    } else if json::is_json(&src.meta.content_type) {
        // In JSON mode every message is a record: skip `sub` more of them.
        match at.get().checked_add(sub).filter(|end| *end <= src_tail.get()) {
            Some(end) => (Offset(end), None),
            None => {
                return Err(DsError::bad(format!(
                    "Stream-Fork-Sub-Offset {sub} passes the end of {:?}",
                    req.source
                )))
            }
        }
    } else {
        // Binary: the first `sub` bytes of the record at the offset.
        let r = fork::read(
            st,
            &src.segments,
            ReadFrom::At(at),
            Duration::ZERO,
            1,
            1,
            Consistency::Local,
        )
        .await?;
        let len = match r.records.first() {
            Some((o, rec)) if *o == at => rec.value.as_ref().map_or(0, |v| v.len()) as u64,
            _ => {
                return Err(DsError::bad(format!(
                    "{:?} has no record at {} to take a sub-offset in",
                    req.source,
                    token(at)
                )))
            }
        };
        if sub > len {
            return Err(DsError::bad(format!(
                "Stream-Fork-Sub-Offset {sub} passes the end of the {len}-byte record at {}",
                token(at)
            )));
        }
        (at, Some(sub))
    };
    let requested_offset = req.offset.map(|_| at);
    Ok(ForkPlan {
        content_type: src.meta.content_type.clone(),
        life,
        fork: ForkOf {
            source: source_topic,
            offset,
            partial,
            requested_offset,
            sub_offset: sub,
            inherited_lifetime,
        },
    })
}

pub async fn create(
    st: &DsState,
    path: &str,
    headers: &HeaderMap,
    body: Result<Bytes, DsError>,
) -> Result<Response, DsError> {
    let body = body?;
    let asked_type = h::content_type(headers).map_err(DsError::bad)?;
    let life = h::lifetime(headers).map_err(DsError::bad)?;
    let close = h::closed(headers).map_err(DsError::bad)?;
    let fork_req = fork::request(headers).map_err(DsError::bad)?;
    let topic = stream::topic(path)?;
    let source_topic = fork_req.as_ref().map(|r| stream::topic(&r.source)).transpose()?;
    let fork_key = source_topic.as_deref().zip(fork_req.as_ref());
    let mut created = false;
    let mut plan = None;
    while !created {
        match stream::lookup(st, path).await? {
            Lookup::Foreign => {
                return Err(DsError::conflict(format!(
                    "topic {topic} exists and is not a Durable Streams stream"
                )))
            }
            Lookup::Gone => {
                return Err(DsError::conflict(format!(
                    "stream {path:?} was deleted and its forks still read it; it cannot be created again yet"
                )))
            }
            Lookup::Found(found) => {
                if !same_config(&found.meta, asked_type.as_deref(), &life, fork_key) {
                    return Err(DsError::conflict(format!(
                        "stream {path:?} exists with a different configuration"
                    )));
                }
                let tail = stream::tail(st, &found).await?;
                let r = Reply::new(StatusCode::OK)
                    .header("content-type", &found.meta.content_type)
                    .header(h::NEXT_OFFSET, token(tail))
                    .header_if(found.meta.closed(), h::CLOSED, "true");
                return Ok(no_store(r).build());
            }
            // Its deletion is the lease holder's; a new stream waits for it.
            Lookup::Expired => {
                stream::wait_deleted(st, &topic).await?;
                continue;
            }
            Lookup::Missing => {}
        }
        let p = match &fork_req {
            Some(req) => plan_fork(st, req, asked_type.as_deref(), life).await?,
            None => ForkPlan {
                content_type: asked_type
                    .clone()
                    .unwrap_or_else(|| h::DEFAULT_CONTENT_TYPE.to_string()),
                life,
                fork: ForkOf::default(),
            },
        };
        let meta = DurableMeta {
            path: path.to_string(),
            content_type: p.content_type.clone(),
            ttl_secs: p.life.ttl_secs,
            expires_at_ms: p.life.expires_at_ms,
            touched_ms: st.engine.clock.now_ms(),
            fork: fork_req.as_ref().map(|_| Box::new(p.fork.clone())),
            ..Default::default()
        };
        let config = TopicConfig {
            durable: Some(meta),
            ..Default::default()
        };
        match st.engine.topics.create_topic(&topic, 1, config).await {
            Ok(_) => {
                let _ = st.engine.cluster.sync_metadata().await;
                created = true;
                plan = Some(p);
            }
            // Created meanwhile by someone else: judge it as existing.
            Err(e) if e.code == ErrorCode::TopicExists => continue,
            // The source was deleted since it was looked at.
            Err(e) if e.code == ErrorCode::InvalidRequest && fork_req.is_some() => {
                return Err(DsError::conflict(e.message))
            }
            Err(e) => return Err(e.into()),
        }
    }
    let plan = plan.expect("set when created");
    let records = initial_records(body, &plan.content_type, json::max_messages(st))?;
    let base = if fork_req.is_some() {
        plan.fork.base()
    } else {
        Offset::ZERO
    };
    stream::wait_open(st, &topic).await?;
    let mut tail = base;
    if !records.is_empty() {
        let a = st
            .engine
            .records
            .append(&topic, 0, append::to_records(records, st.engine.clock.now_ms()))
            .await?;
        tail = Offset(base.get() + a.base.get() + u64::from(a.count));
    }
    if close {
        stream::update(st, &topic, vec![DurableUpdate::Close { at: tail, by: None }]).await?;
    }
    let host = headers.get("host").and_then(|v| v.to_str().ok()).unwrap_or("localhost");
    let r = Reply::new(StatusCode::CREATED)
        .header("content-type", &plan.content_type)
        .header("location", format!("http://{host}/v1/stream/{path}"))
        .header(h::NEXT_OFFSET, token(tail))
        .header_if(close, h::CLOSED, "true");
    Ok(no_store(r).build())
}

pub async fn head(st: &DsState, path: &str) -> Result<Response, DsError> {
    let found = stream::find(st, path).await?;
    let tail = stream::tail(st, &found).await?;
    let m = &found.meta;
    let r = Reply::new(StatusCode::OK)
        .header("content-type", &m.content_type)
        .header(h::NEXT_OFFSET, token(tail))
        .header_if(m.closed(), h::CLOSED, "true");
    let r = match m.ttl_secs {
        Some(t) => r.header(h::TTL, t.to_string()),
        None => r,
    };
    let r = match m.expires_at_ms {
        Some(at) => r.header(h::EXPIRES_AT, format_rfc3339(at)),
        None => r,
    };
    Ok(no_store(r).build())
}

pub async fn delete(st: &DsState, path: &str) -> Result<Response, DsError> {
    let found = stream::find(st, path).await?;
    match st.engine.topics.delete_topic(&found.topic).await {
        Ok(()) => {
            let _ = st.engine.cluster.sync_metadata().await;
            Ok(Reply::new(StatusCode::NO_CONTENT).build())
        }
        Err(e) if e.code == ErrorCode::TopicNotFound => Err(DsError::not_found(path)),
        Err(e) => Err(e.into()),
    }
}
