//! S3 and S3-compatible servers (`s3://bucket/prefix`), through
//! `object_store`'s AWS client, with credentials from the standard AWS chain
//! (`aws-config`: environment, profile, web identity, ECS task role, IMDS).
//!
//! Create-if-absent is `PUT` with `If-None-Match: *`: a 412 is
//! `AlreadyExists`, never an error. A 409 ConditionalRequestConflict (another
//! conditional write to the key was in flight) is *not*: `object_store`
//! reports it as `AlreadyExists` too, and does not retry it, but the key may
//! not exist at all, so it is told apart here ([`key_exists`]) and becomes an
//! error. Every failure of a PUT is classified *indeterminate*: the client
//! retries 5xx and 503 SlowDown itself, so an error that reaches us may
//! follow an attempt that landed. Callers settle it by retrying, or reading
//! the object back (the WAL compares bytes; the metadata log looks for its
//! proposal id).

use super::{ObjectMeta, ObjectStore, PutOutcome, StoreError, StoreResult};
use async_trait::async_trait;
use aws_credential_types::provider::ProvideCredentials;
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder, AwsCredential};
use object_store::path::Path;
use object_store::{
    BackoffConfig, ClientOptions, CredentialProvider, GetOptions, GetRange, ObjectStore as _, ObjectStoreExt as _,
    PutMode, PutOptions, PutPayload, RetryConfig,
};
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// Where and how to reach S3.
#[derive(Debug, Clone, Default)]
pub struct S3Options {
    /// A custom endpoint (an S3-compatible server), e.g. `http://127.0.0.1:7480`.
    pub endpoint: Option<String>,
    pub region: Option<String>,
    /// Path-style requests (`endpoint/bucket/key`) instead of virtual hosts.
    pub force_path_style: bool,
}

/// `s3://bucket/prefix` → (bucket, prefix ending with `/` or empty).
pub fn parse_url(url: &str) -> anyhow::Result<(String, String)> {
    let rest = url
        .strip_prefix("s3://")
        .ok_or_else(|| anyhow::anyhow!("{url:?} is not an s3:// URL"))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        anyhow::bail!("{url:?} names no bucket");
    }
    let prefix = prefix.trim_matches('/');
    if !prefix.is_empty() {
        super::validate_key(prefix).map_err(|e| anyhow::anyhow!("prefix of {url:?}: {e}"))?;
    }
    let prefix = if prefix.is_empty() {
        String::new()
    } else {
        format!("{prefix}/")
    };
    Ok((bucket.to_string(), prefix))
}

/// Credentials from the AWS default chain, cached until shortly before they expire.
#[derive(Debug)]
struct AwsChainCredentials {
    provider: aws_credential_types::provider::SharedCredentialsProvider,
    cached: Mutex<Option<(Arc<AwsCredential>, Option<SystemTime>)>>,
}

#[async_trait]
impl CredentialProvider for AwsChainCredentials {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        if let Some((c, expiry)) = self.cached.lock().unwrap().clone() {
            let now = crate::clock::system_time(&crate::clock::SystemClock::default());
            let fresh = expiry.is_none_or(|e| e > now + Duration::from_secs(300));
            if fresh {
                return Ok(c);
            }
        }
        let creds = self
            .provider
            .provide_credentials()
            .await
            .map_err(|e| object_store::Error::Generic {
                store: "S3",
                source: Box::new(e),
            })?;
        let c = Arc::new(AwsCredential {
            key_id: creds.access_key_id().to_string(),
            secret_key: creds.secret_access_key().to_string(),
            token: creds.session_token().map(str::to_string),
        });
        *self.cached.lock().unwrap() = Some((c.clone(), creds.expiry()));
        Ok(c)
    }
}

/// The AWS SDK configuration: region and credential chain.
pub async fn sdk_config(region: Option<&str>) -> aws_config::SdkConfig {
    let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest());
    if let Some(r) = region {
        loader = loader.region(aws_config::Region::new(r.to_string()));
    }
    loader.load().await
}

/// Whether `bucket` names an S3 Express One Zone directory bucket.
pub fn is_directory_bucket(bucket: &str) -> bool {
    bucket.ends_with("--x-s3")
}

#[derive(Debug)]
pub struct S3Store {
    client: AmazonS3,
    bucket: String,
    prefix: String,
}

impl S3Store {
    pub async fn open(url: &str, options: &S3Options) -> anyhow::Result<Self> {
        let (bucket, prefix) = parse_url(url)?;
        let sdk = sdk_config(options.region.as_deref()).await;
        let provider = sdk
            .credentials_provider()
            .ok_or_else(|| anyhow::anyhow!("no AWS credentials provider is configured"))?;
        let region = options
            .region
            .clone()
            .or_else(|| sdk.region().map(|r| r.to_string()))
            .unwrap_or_else(|| "us-east-1".to_string());
        let http = options.endpoint.as_deref().is_some_and(|e| e.starts_with("http://"));
        let client_options = ClientOptions::new()
            .with_allow_http(http)
            .with_connect_timeout(Duration::from_secs(5))
            .with_timeout(Duration::from_secs(30));
        // Few, quick retries: the WAL and the proposer retry on their own.
        let retry = RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: 3,
            retry_timeout: Duration::from_secs(15),
        };
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(&bucket)
            .with_region(region)
            .with_client_options(client_options)
            .with_retry(retry)
            .with_credentials(Arc::new(AwsChainCredentials {
                provider,
                cached: Mutex::new(None),
            }))
            .with_virtual_hosted_style_request(!options.force_path_style && options.endpoint.is_none())
            // S3 Express One Zone directory buckets (`name--azid--x-s3`, e.g. a
            // separate WAL bucket) need the zonal endpoint and CreateSession auth.
            .with_s3_express(is_directory_bucket(&bucket) && options.endpoint.is_none());
        if let Some(e) = &options.endpoint {
            builder = builder.with_endpoint(e);
        }
        Ok(Self {
            client: builder.build()?,
            bucket,
            prefix,
        })
    }

    fn path(&self, key: &str) -> Path {
        Path::from(format!("{}{key}", self.prefix))
    }

    fn classify(&self, op: &'static str, key: &str, e: object_store::Error, may_have_landed: bool) -> StoreError {
        if may_have_landed {
            StoreError::indeterminate(op, key, format!("s3://{}/{}{key}: {e}", self.bucket, self.prefix))
        } else {
            StoreError::determinate(op, key, true, format!("s3://{}/{}{key}: {e}", self.bucket, self.prefix))
        }
    }
}

/// Whether a failed `If-None-Match: *` PUT says the key exists: a 412 (or
/// a 304), which `object_store` wraps in `AlreadyExists`. Its
/// `AlreadyExists` for a 409 ConditionalRequestConflict says nothing of the
/// kind — the conflicting write may be ours, and may not land — and a caller
/// who took it for "stored" would reference an object that is not there.
fn key_exists(e: &object_store::Error) -> bool {
    use object_store::Error as E;
    match e {
        E::Precondition { .. } | E::NotModified { .. } => true,
        E::AlreadyExists { source, .. } => matches!(
            source.downcast_ref::<object_store::Error>(),
            Some(E::Precondition { .. } | E::NotModified { .. })
        ),
        _ => false,
    }
}

#[async_trait]
impl ObjectStore for S3Store {
    async fn put_if_absent(&self, key: &str, body: Bytes) -> StoreResult<PutOutcome> {
        super::check_key("put", key)?;
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        match self
            .client
            .put_opts(&self.path(key), PutPayload::from(body), opts)
            .await
        {
            Ok(_) => Ok(PutOutcome::Created),
            Err(e) if key_exists(&e) => Ok(PutOutcome::AlreadyExists),
            Err(e) => Err(self.classify("put", key, e, true)),
        }
    }

    async fn get(&self, key: &str, range: Option<Range<u64>>) -> StoreResult<Option<Bytes>> {
        super::check_key("get", key)?;
        let path = self.path(key);
        if let Some(r) = &range {
            if r.start >= r.end {
                // S3 refuses empty ranges; answer from the object's size.
                return match self.client.head(&path).await {
                    Ok(meta) if r.start <= meta.size => Ok(Some(Bytes::new())),
                    Ok(meta) => Err(StoreError::determinate(
                        "get",
                        key,
                        false,
                        format!("range starts at {} past the end {}", r.start, meta.size),
                    )),
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    Err(e) => Err(self.classify("get", key, e, false)),
                };
            }
        }
        let opts = GetOptions {
            range: range.clone().map(GetRange::Bounded),
            ..Default::default()
        };
        match self.client.get_opts(&path, opts).await {
            Ok(r) => r
                .bytes()
                .await
                .map(Some)
                .map_err(|e| self.classify("get", key, e, false)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => {
                // A range starting at or past the end: S3 answers 416.
                if let Some(r) = &range {
                    if let Ok(meta) = self.client.head(&path).await {
                        if r.start == meta.size {
                            return Ok(Some(Bytes::new()));
                        }
                        if r.start > meta.size {
                            return Err(StoreError::determinate(
                                "get",
                                key,
                                false,
                                format!("range starts at {} past the end {}", r.start, meta.size),
                            ));
                        }
                    }
                }
                Err(self.classify("get", key, e, false))
            }
        }
    }

    async fn list(&self, prefix: &str) -> StoreResult<Vec<ObjectMeta>> {
        super::check_prefix(prefix)?;
        // `object_store` lists by whole path segments; our prefixes may end
        // mid-segment, so list the enclosing directory and filter.
        let dir = prefix.rfind('/').map_or("", |i| &prefix[..i]);
        let full_dir = format!("{}{dir}", self.prefix);
        let list_path = if full_dir.is_empty() {
            None
        } else {
            Some(Path::from(full_dir.trim_end_matches('/')))
        };
        let listed: Vec<object_store::ObjectMeta> = self
            .client
            .list(list_path.as_ref())
            .try_collect()
            .await
            .map_err(|e| self.classify("list", prefix, e, false))?;
        let mut out: Vec<ObjectMeta> = listed
            .into_iter()
            .filter_map(|m| {
                let key = m.location.as_ref().strip_prefix(self.prefix.as_str())?.to_string();
                key.starts_with(prefix).then_some(ObjectMeta { key, size: m.size })
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    async fn delete(&self, key: &str) -> StoreResult<()> {
        super::check_key("delete", key)?;
        match self.client.delete(&self.path(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.classify("delete", key, e, true)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_a_bucket_and_an_optional_prefix() {
        assert_eq!(parse_url("s3://b").unwrap(), ("b".to_string(), String::new()));
        assert_eq!(parse_url("s3://b/").unwrap(), ("b".to_string(), String::new()));
        assert_eq!(parse_url("s3://b/x/y/").unwrap(), ("b".to_string(), "x/y/".to_string()));
        assert!(parse_url("s3:///x").is_err());
        assert!(parse_url("file:///x").is_err());
        assert!(parse_url("s3://b/a//b").is_err());
    }

    #[test]
    fn only_a_failed_precondition_says_the_key_exists() {
        use object_store::Error as E;
        let precondition = || E::Precondition {
            path: "k".into(),
            source: "412 Precondition Failed".into(),
        };
        assert!(key_exists(&precondition()));
        // What `object_store` makes of a 412 to `If-None-Match: *`...
        assert!(key_exists(&E::AlreadyExists {
            path: "k".into(),
            source: Box::new(precondition()),
        }));
        // ...and of a 409 ConditionalRequestConflict: the key may not exist.
        assert!(!key_exists(&E::AlreadyExists {
            path: "k".into(),
            source: "409 Conflict: ConditionalRequestConflict".into(),
        }));
        assert!(!key_exists(&E::Generic {
            store: "S3",
            source: "500".into(),
        }));
    }

    #[test]
    fn directory_buckets_are_recognised_by_their_suffix() {
        assert!(is_directory_bucket("sluice-wal--use1-az4--x-s3"));
        assert!(!is_directory_bucket("sluice-data"));
        assert!(!is_directory_bucket("x-s3"));
    }

    #[tokio::test]
    async fn a_directory_bucket_is_opened_as_s3_express() {
        // The S3 Express builder derives the zonal endpoint from the name, so
        // a directory-bucket name without a zone id is refused while building
        // the client (no request is sent); an ordinary bucket is not.
        let err = S3Store::open("s3://nozone--x-s3/", &S3Options::default())
            .await
            .expect_err("an S3 Express bucket needs a zone id");
        assert!(err.to_string().contains("nozone--x-s3"), "{err}");
        assert!(S3Store::open("s3://wal--use1-az4--x-s3/", &S3Options::default())
            .await
            .is_ok());
        assert!(S3Store::open("s3://plain/", &S3Options::default()).await.is_ok());
    }
}
