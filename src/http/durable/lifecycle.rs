//! `PUT` (create, idempotent), `HEAD` (metadata) and `DELETE`.

use super::headers::{self as h, media_type, Lifetime};
use super::offset::token;
use super::reply::{no_store, DsError, Reply};
use super::stream::{self, Lookup};
use super::time::{format_rfc3339, now_ms};
use super::{append, json, DsState};
use crate::api::ErrorCode;
use crate::meta::durable::{DurableMeta, DurableUpdate};
use crate::meta::TopicConfig;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

/// Whether an existing stream was created with the same configuration.
fn same_config(meta: &DurableMeta, content_type: &str, life: &Lifetime) -> bool {
    media_type(&meta.content_type) == media_type(content_type)
        && meta.ttl_secs == life.ttl_secs
        && meta.expires_at_ms == life.expires_at_ms
}

pub async fn create(
    st: &DsState,
    path: &str,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, DsError> {
    let body = append::take_body(body)?;
    let content_type = h::content_type(headers)
        .map_err(DsError::bad)?
        .unwrap_or_else(|| h::DEFAULT_CONTENT_TYPE.to_string());
    let life = h::lifetime(headers).map_err(DsError::bad)?;
    let close = h::closed(headers).map_err(DsError::bad)?;
    let records = if body.is_empty() {
        Vec::new()
    } else if json::is_json(&content_type) {
        match json::messages(&body) {
            Ok(m) => m,
            Err(json::JsonError::EmptyArray) => Vec::new(),
            Err(json::JsonError::Invalid(e)) => return Err(DsError::bad(format!("body is not JSON: {e}"))),
        }
    } else {
        vec![body]
    };
    let topic = stream::topic(path)?;
    let now = now_ms();
    let meta = DurableMeta {
        path: path.to_string(),
        content_type: content_type.clone(),
        ttl_secs: life.ttl_secs,
        expires_at_ms: life.expires_at_ms,
        touched_ms: now,
        ..Default::default()
    };
    let config = TopicConfig {
        durable: Some(meta),
        ..Default::default()
    };
    loop {
        match stream::lookup(st, path).await? {
            Lookup::Foreign => {
                return Err(DsError::conflict(format!(
                    "topic {topic} exists and is not a Durable Streams stream"
                )))
            }
            Lookup::Found(found) => {
                if !same_config(&found.meta, &content_type, &life) {
                    return Err(DsError::conflict(format!(
                        "stream {path:?} exists with a different configuration"
                    )));
                }
                let tail = stream::tail(st, &found.topic).await?;
                let r = Reply::new(StatusCode::OK)
                    .header("content-type", &found.meta.content_type)
                    .header(h::NEXT_OFFSET, token(tail))
                    .header_if(found.meta.closed(), h::CLOSED, "true");
                return Ok(no_store(r).build());
            }
            Lookup::Missing => match st.engine.create_topic(&topic, 1, config.clone()).await {
                Ok(_) => {
                    let _ = st.engine.sync_metadata().await;
                    break;
                }
                // Created meanwhile by someone else: judge it as existing.
                Err(e) if e.code == ErrorCode::TopicExists => continue,
                Err(e) => return Err(e.into()),
            },
        }
    }
    stream::wait_open(st, &topic).await?;
    let mut tail = crate::ids::Offset::ZERO;
    if !records.is_empty() {
        let a = st.engine.append(&topic, 0, append::to_records(records)).await?;
        tail = crate::ids::Offset(a.base.get() + u64::from(a.count));
    }
    if close {
        stream::update(st, &topic, vec![DurableUpdate::Close { at: tail, by: None }]).await?;
    }
    let host = headers.get("host").and_then(|v| v.to_str().ok()).unwrap_or("localhost");
    let r = Reply::new(StatusCode::CREATED)
        .header("content-type", &content_type)
        .header("location", format!("http://{host}/v1/stream/{path}"))
        .header(h::NEXT_OFFSET, token(tail))
        .header_if(close, h::CLOSED, "true");
    Ok(no_store(r).build())
}

pub async fn head(st: &DsState, path: &str) -> Result<Response, DsError> {
    let found = stream::find(st, path).await?;
    let tail = stream::tail(st, &found.topic).await?;
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
    match st.engine.delete_topic(&found.topic).await {
        Ok(()) => {
            let _ = st.engine.sync_metadata().await;
            Ok(Reply::new(StatusCode::NO_CONTENT).build())
        }
        Err(e) if e.code == ErrorCode::TopicNotFound => Err(DsError::not_found(path)),
        Err(e) => Err(e.into()),
    }
}
