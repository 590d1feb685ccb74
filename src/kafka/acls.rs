//! DescribeAcls, CreateAcls and DeleteAcls (v1–v3; v2+ flexible): the
//! codecs and the answers.
//!
//! Sluice has no ACL store. With `--auth off` it answers as Kafka does with
//! no authorizer configured: `SECURITY_DISABLED` for the request (Describe)
//! or for each creation and filter (Create, Delete). With `--auth on` the
//! permissions that exist are the scopes of the issued tokens, and
//! DescribeAcls shows them as ACL bindings ([`acl_view`]): each scope
//! becomes ALLOW bindings for principal `User:<token id>` on host `*`.
//! ACLs cannot be created or deleted here: permissions change by issuing
//! or revoking tokens over HTTP, and CreateAcls / DeleteAcls say so per
//! entry with `INVALID_REQUEST`. Only tokens the caller may list (cluster
//! admin, see [`super::authz`]) are shown; for anyone else the view is
//! empty.

use super::proto::Fields;
use super::wire::{DecodeResult, Reader, Writer};
use crate::api::Services;
use crate::auth::{Op, TokenInfo};
use kafka_protocol::messages as km;
use kafka_protocol::protocol::StrBytes;

pub const DESCRIBE_ACLS: i16 = 29;
pub const CREATE_ACLS: i16 = 30;
pub const DELETE_ACLS: i16 = 31;

pub fn is_acl_api(key: i16) -> bool {
    matches!(key, DESCRIBE_ACLS | CREATE_ACLS | DELETE_ACLS)
}

/// Kafka error codes of these APIs.
pub mod acl_code {
    pub const SECURITY_DISABLED: i16 = 54;
    pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
    pub const INVALID_REQUEST: i16 = super::super::code::INVALID_REQUEST;
}

/// Kafka's `ResourceType`.
pub mod resource_type {
    pub const ANY: i8 = 1;
    pub const TOPIC: i8 = 2;
    pub const GROUP: i8 = 3;
    pub const CLUSTER: i8 = 4;
}

/// Kafka's `PatternType`.
pub mod pattern {
    pub const ANY: i8 = 1;
    pub const MATCH: i8 = 2;
    pub const LITERAL: i8 = 3;
    pub const PREFIXED: i8 = 4;
}

/// Kafka's `AclOperation`.
pub mod operation {
    pub const ANY: i8 = 1;
    pub const ALL: i8 = 2;
    pub const READ: i8 = 3;
    pub const WRITE: i8 = 4;
    pub const CREATE: i8 = 5;
    pub const DELETE: i8 = 6;
    pub const ALTER: i8 = 7;
    pub const DESCRIBE: i8 = 8;
    pub const DESCRIBE_CONFIGS: i8 = 10;
    pub const ALTER_CONFIGS: i8 = 11;
}

/// Kafka's `AclPermissionType`.
pub mod permission {
    pub const ANY: i8 = 1;
    pub const ALLOW: i8 = 3;
}

/// The name of the cluster resource in Kafka ACLs.
pub const CLUSTER_RESOURCE: &str = "kafka-cluster";

/// What CreateAcls and DeleteAcls answer with `--auth on`.
pub const IMMUTABLE: &str =
    "ACLs are the scopes of Sluice tokens; issue or revoke a token over HTTP: POST /v1/tokens, DELETE /v1/tokens/<id>";

const NO_AUTHORIZER: &str = "security is disabled (--auth off): there are no ACLs";
/// Kafka asks for DESCRIBE (listing) or ALTER (changing) on the cluster;
/// here both are `admin` on `*`, which also lists every token.
const NOT_ADMIN: &str = "the ACL APIs need a token with admin on \"*\"";

fn flexible(version: i16) -> bool {
    version >= 2
}

/// One ACL: a resource pattern and an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclBinding {
    pub resource_type: i8,
    pub resource_name: String,
    pub pattern_type: i8,
    pub principal: String,
    pub host: String,
    pub operation: i8,
    pub permission_type: i8,
}

/// A filter over ACLs (DescribeAcls, each of DeleteAcls): `None` and the
/// ANY codes match everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: i8,
    pub resource_name: Option<String>,
    pub pattern_type: i8,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: i8,
    pub permission_type: i8,
}

impl AclFilter {
    /// Kafka's matching of a binding by a filter (`AclBindingFilter.matches`).
    pub fn matches(&self, b: &AclBinding) -> bool {
        let eq_or_none = |f: &Option<String>, v: &str| f.as_deref().is_none_or(|f| f == v);
        (self.resource_type == resource_type::ANY || self.resource_type == b.resource_type)
            && self.matches_pattern(b)
            && eq_or_none(&self.principal, &b.principal)
            && eq_or_none(&self.host, &b.host)
            && (self.operation == operation::ANY || self.operation == b.operation)
            && (self.permission_type == permission::ANY || self.permission_type == b.permission_type)
    }

    fn matches_pattern(&self, b: &AclBinding) -> bool {
        if !matches!(self.pattern_type, pattern::ANY | pattern::MATCH) && self.pattern_type != b.pattern_type {
            return false;
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        if self.pattern_type != pattern::MATCH {
            return *name == b.resource_name;
        }
        match b.pattern_type {
            pattern::LITERAL => *name == b.resource_name || b.resource_name == "*",
            pattern::PREFIXED => name.starts_with(&b.resource_name),
            _ => false,
        }
    }
}

// ------------------------------------------------------------ codecs

/// The fewest bytes an ACL binding or filter takes, classic and compact:
/// type, name, pattern, principal, host, operation, permission (+ tags).
const ENTRY_MIN: (usize, usize) = (1 + 2 + 1 + 2 + 2 + 1 + 1, 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1);

fn filter(f: &mut Fields) -> DecodeResult<AclFilter> {
    let resource_type = f.r.i8()?;
    let resource_name = f.nullable_string()?;
    let pattern_type = f.r.i8()?;
    let principal = f.nullable_string()?;
    let host = f.nullable_string()?;
    let operation = f.r.i8()?;
    let permission_type = f.r.i8()?;
    f.tags()?;
    Ok(AclFilter {
        resource_type,
        resource_name,
        pattern_type,
        principal,
        host,
        operation,
        permission_type,
    })
}

pub fn decode_describe_acls(r: &mut Reader, version: i16) -> DecodeResult<AclFilter> {
    let mut f = Fields {
        r,
        flexible: flexible(version),
    };
    let out = filter(&mut f)?;
    f.r.expect_end()?;
    Ok(out)
}

pub fn decode_create_acls(r: &mut Reader, version: i16) -> DecodeResult<Vec<AclBinding>> {
    let mut f = Fields {
        r,
        flexible: flexible(version),
    };
    let n = f.array_of(ENTRY_MIN.0, ENTRY_MIN.1)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let resource_type = f.r.i8()?;
        let resource_name = f.string()?;
        let pattern_type = f.r.i8()?;
        let principal = f.string()?;
        let host = f.string()?;
        let operation = f.r.i8()?;
        let permission_type = f.r.i8()?;
        f.tags()?;
        out.push(AclBinding {
            resource_type,
            resource_name,
            pattern_type,
            principal,
            host,
            operation,
            permission_type,
        });
    }
    f.tags()?;
    f.r.expect_end()?;
    Ok(out)
}

pub fn decode_delete_acls(r: &mut Reader, version: i16) -> DecodeResult<Vec<AclFilter>> {
    let mut f = Fields {
        r,
        flexible: flexible(version),
    };
    let n = f.array_of(ENTRY_MIN.0, ENTRY_MIN.1)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(filter(&mut f)?);
    }
    f.tags()?;
    f.r.expect_end()?;
    Ok(out)
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// DescribeAcls: `bindings` grouped by resource pattern, in first-seen order.
pub fn encode_describe_acls(
    w: &mut Writer,
    version: i16,
    error: Option<(i16, &str)>,
    bindings: &[AclBinding],
) -> DecodeResult<()> {
    use km::describe_acls_response as d;
    let mut resources: Vec<d::DescribeAclsResource> = Vec::new();
    for b in bindings {
        let acl = d::AclDescription::default()
            .with_principal(sb(&b.principal))
            .with_host(sb(&b.host))
            .with_operation(b.operation)
            .with_permission_type(b.permission_type);
        let same = |r: &&mut d::DescribeAclsResource| {
            r.resource_type == b.resource_type
                && r.resource_name.as_str() == b.resource_name
                && r.pattern_type == b.pattern_type
        };
        match resources.iter_mut().find(|r| same(r)) {
            Some(r) => r.acls.push(acl),
            None => resources.push(
                d::DescribeAclsResource::default()
                    .with_resource_type(b.resource_type)
                    .with_resource_name(sb(&b.resource_name))
                    .with_pattern_type(b.pattern_type)
                    .with_acls(vec![acl]),
            ),
        }
    }
    let resp = km::DescribeAclsResponse::default()
        .with_error_code(error.map_or(0, |e| e.0))
        .with_error_message(error.map(|e| sb(e.1)))
        .with_resources(resources);
    w.message(&resp, version)
}

/// CreateAcls: one (error code, message) per creation.
pub fn encode_create_acls(w: &mut Writer, version: i16, results: &[(i16, Option<String>)]) -> DecodeResult<()> {
    let resp = km::CreateAclsResponse::default().with_results(
        results
            .iter()
            .map(|(code, message)| {
                km::create_acls_response::AclCreationResult::default()
                    .with_error_code(*code)
                    .with_error_message(message.as_deref().map(sb))
            })
            .collect(),
    );
    w.message(&resp, version)
}

/// One filter's answer to DeleteAcls.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FilterResult {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub deleted: Vec<AclBinding>,
}

pub fn encode_delete_acls(w: &mut Writer, version: i16, results: &[FilterResult]) -> DecodeResult<()> {
    use km::delete_acls_response as d;
    let resp = km::DeleteAclsResponse::default().with_filter_results(
        results
            .iter()
            .map(|r| {
                d::DeleteAclsFilterResult::default()
                    .with_error_code(r.error_code)
                    .with_error_message(r.error_message.as_deref().map(sb))
                    .with_matching_acls(
                        r.deleted
                            .iter()
                            .map(|b| {
                                d::DeleteAclsMatchingAcl::default()
                                    .with_resource_type(b.resource_type)
                                    .with_resource_name(sb(&b.resource_name))
                                    .with_pattern_type(b.pattern_type)
                                    .with_principal(sb(&b.principal))
                                    .with_host(sb(&b.host))
                                    .with_operation(b.operation)
                                    .with_permission_type(b.permission_type)
                            })
                            .collect(),
                    )
            })
            .collect(),
    );
    w.message(&resp, version)
}

// ------------------------------------------------------------ the view

/// A topic glob as a Kafka resource pattern: a name without wildcards is
/// LITERAL, `*` is the LITERAL wildcard, `abc*` is PREFIXED `abc`. Any
/// other glob (`?`, or `*` elsewhere) has no Kafka equivalent and is shown
/// verbatim as LITERAL.
pub fn topic_pattern(glob: &str) -> (i8, String) {
    match glob.strip_suffix('*') {
        Some(prefix) if !prefix.is_empty() && !prefix.contains(['*', '?']) => (pattern::PREFIXED, prefix.to_string()),
        _ => (pattern::LITERAL, glob.to_string()),
    }
}

/// The Kafka operations a scope op grants on its topics (DESCRIBE is
/// implied by every op, as `authz` lets any op see a topic).
fn topic_operations(op: Op) -> &'static [i8] {
    use operation::*;
    match op {
        Op::Read => &[READ, DESCRIBE],
        Op::Write => &[WRITE, DESCRIBE],
        Op::Admin => &[CREATE, DELETE, ALTER, DESCRIBE_CONFIGS, ALTER_CONFIGS, DESCRIBE],
    }
}

/// The ACL bindings the unexpired `tokens` amount to, per token: its
/// scopes on TOPIC resources; READ on every GROUP (groups are not scoped);
/// and, for a token with `admin` on `*`, ALL on the CLUSTER.
pub fn acl_view(tokens: &[TokenInfo]) -> Vec<AclBinding> {
    let mut out: Vec<AclBinding> = Vec::new();
    for t in tokens.iter().filter(|t| !t.expired) {
        let principal = format!("User:{}", t.id);
        let mut push = |resource_type: i8, (pattern_type, resource_name): (i8, String), operation: i8| {
            let b = AclBinding {
                resource_type,
                resource_name,
                pattern_type,
                principal: principal.clone(),
                host: "*".into(),
                operation,
                permission_type: permission::ALLOW,
            };
            if !out.contains(&b) {
                out.push(b);
            }
        };
        for s in &t.scopes {
            for op in &s.ops {
                for &kop in topic_operations(*op) {
                    push(resource_type::TOPIC, topic_pattern(&s.topics), kop);
                }
            }
        }
        push(resource_type::GROUP, (pattern::LITERAL, "*".into()), operation::READ);
        if t.scopes.iter().any(|s| s.topics == "*" && s.ops.contains(&Op::Admin)) {
            push(
                resource_type::CLUSTER,
                (pattern::LITERAL, CLUSTER_RESOURCE.into()),
                operation::ALL,
            );
        }
    }
    out
}

// ------------------------------------------------------------ handlers

pub(super) fn request(engine: &Services, key: i16, version: i16, r: &mut Reader, w: &mut Writer) -> DecodeResult<()> {
    let auth = engine.tokens.auth_required();
    match key {
        DESCRIBE_ACLS => {
            let f = decode_describe_acls(r, version)?;
            if !auth {
                return encode_describe_acls(w, version, Some((acl_code::SECURITY_DISABLED, NO_AUTHORIZER)), &[]);
            }
            let Ok(tokens) = engine.tokens.list_tokens() else {
                let refused = Some((acl_code::CLUSTER_AUTHORIZATION_FAILED, NOT_ADMIN));
                return encode_describe_acls(w, version, refused, &[]);
            };
            let view: Vec<AclBinding> = acl_view(&tokens).into_iter().filter(|b| f.matches(b)).collect();
            encode_describe_acls(w, version, None, &view)
        }
        CREATE_ACLS => {
            let creations = decode_create_acls(r, version)?;
            let (code, message) = if !auth {
                (acl_code::SECURITY_DISABLED, NO_AUTHORIZER)
            } else if engine.tokens.list_tokens().is_err() {
                (acl_code::CLUSTER_AUTHORIZATION_FAILED, NOT_ADMIN)
            } else {
                (acl_code::INVALID_REQUEST, IMMUTABLE)
            };
            let results: Vec<_> = creations.iter().map(|_| (code, Some(message.to_string()))).collect();
            encode_create_acls(w, version, &results)
        }
        DELETE_ACLS => {
            let filters = decode_delete_acls(r, version)?;
            let view = if auth {
                engine.tokens.list_tokens().map(|t| acl_view(&t))
            } else {
                Ok(Vec::new())
            };
            let results: Vec<FilterResult> = filters
                .iter()
                .map(|f| {
                    let fail = |error_code, message: &str| FilterResult {
                        error_code,
                        error_message: Some(message.into()),
                        deleted: Vec::new(),
                    };
                    let Ok(view) = &view else {
                        return fail(acl_code::CLUSTER_AUTHORIZATION_FAILED, NOT_ADMIN);
                    };
                    if !auth {
                        fail(acl_code::SECURITY_DISABLED, NO_AUTHORIZER)
                    } else if view.iter().any(|b| f.matches(b)) {
                        // Something matches, and it cannot be deleted.
                        fail(acl_code::INVALID_REQUEST, IMMUTABLE)
                    } else {
                        // Nothing matches: nothing to delete, as Kafka answers.
                        FilterResult::default()
                    }
                })
                .collect();
            encode_delete_acls(w, version, &results)
        }
        _ => unreachable!("is_acl_api() admits only the keys above"),
    }
}
