//! The ACL APIs: codecs at every version against kafka-protocol's structs,
//! bounds, the token-scope view and its filters, and the answers with auth
//! off and on.

use super::*;
use crate::auth::{AuthFailure, IssuedToken, NewToken, Op, Principal, Scope, TokenInfo};
use crate::kafka::acls::*;
use crate::kafka::header::{flexible_request, flexible_response};
use kafka_protocol::messages as km;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

fn versions_of(key: i16) -> std::ops::RangeInclusive<i16> {
    let (_, min, max) = SUPPORTED.iter().find(|r| r.0 == key).copied().unwrap();
    min..=max
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn enc<M: Encodable>(m: &M, version: i16) -> Vec<u8> {
    let mut b = bytes::BytesMut::new();
    m.encode(&mut b, version).unwrap();
    b.to_vec()
}

fn truncations_fail(body: &[u8], decode: impl Fn(&mut Reader) -> wire::DecodeResult<()>) {
    for cut in 0..body.len() {
        let mut r = Reader::new(Bytes::copy_from_slice(&body[..cut]));
        assert!(decode(&mut r).is_err(), "cut at {cut} of {}", body.len());
    }
}

fn frame(key: i16, version: i16, body: &[u8]) -> Bytes {
    let mut w = Writer::default();
    w.i16(key);
    w.i16(version);
    w.i32(7);
    w.nullable_string(Some("acl-test"));
    if flexible_request(key, version) {
        w.no_tagged_fields();
    }
    w.buf.extend_from_slice(body);
    w.buf.freeze()
}

async fn answer<M: Decodable>(engine: &Services, key: i16, version: i16, body: &[u8]) -> M {
    let mut r = call(engine, frame(key, version, body)).await;
    if flexible_response(key, version) {
        r.tagged_fields().unwrap();
    }
    let mut b = r.bytes_exact(r.remaining()).unwrap();
    let m = M::decode(&mut b, version).unwrap();
    assert!(b.is_empty(), "key {key} v{version}: {} bytes left", b.len());
    m
}

fn describe_req(name: Option<&str>, pattern_type: i8, principal: Option<&str>, op: i8) -> km::DescribeAclsRequest {
    km::DescribeAclsRequest::default()
        .with_resource_type_filter(resource_type::ANY)
        .with_resource_name_filter(name.map(sb))
        .with_pattern_type_filter(pattern_type)
        .with_principal_filter(principal.map(sb))
        .with_host_filter(None)
        .with_operation(op)
        .with_permission_type(permission::ANY)
}

fn creation() -> km::create_acls_request::AclCreation {
    km::create_acls_request::AclCreation::default()
        .with_resource_type(resource_type::TOPIC)
        .with_resource_name(sb("orders"))
        .with_resource_pattern_type(pattern::PREFIXED)
        .with_principal(sb("User:alice"))
        .with_host(sb("*"))
        .with_operation(operation::READ)
        .with_permission_type(permission::ALLOW)
}

fn delete_filter(name: Option<&str>) -> km::delete_acls_request::DeleteAclsFilter {
    km::delete_acls_request::DeleteAclsFilter::default()
        .with_resource_type_filter(resource_type::TOPIC)
        .with_resource_name_filter(name.map(sb))
        .with_pattern_type_filter(pattern::ANY)
        .with_principal_filter(Some(sb("User:t1")))
        .with_host_filter(Some(sb("*")))
        .with_operation(operation::ANY)
        .with_permission_type(permission::ANY)
}

#[test]
fn acl_requests_decode_at_every_version() {
    for v in versions_of(DESCRIBE_ACLS) {
        let body = enc(
            &describe_req(Some("t"), pattern::MATCH, Some("User:x"), operation::READ),
            v,
        );
        let got = decode_describe_acls(&mut Reader::new(Bytes::from(body.clone())), v).unwrap();
        assert_eq!(
            got,
            AclFilter {
                resource_type: resource_type::ANY,
                resource_name: Some("t".into()),
                pattern_type: pattern::MATCH,
                principal: Some("User:x".into()),
                host: None,
                operation: operation::READ,
                permission_type: permission::ANY,
            },
            "v{v}"
        );
        truncations_fail(&body, |r| decode_describe_acls(r, v).map(|_| ()));
    }
    for v in versions_of(CREATE_ACLS) {
        let body = enc(
            &km::CreateAclsRequest::default().with_creations(vec![creation(), creation()]),
            v,
        );
        let got = decode_create_acls(&mut Reader::new(Bytes::from(body.clone())), v).unwrap();
        let want = AclBinding {
            resource_type: resource_type::TOPIC,
            resource_name: "orders".into(),
            pattern_type: pattern::PREFIXED,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: operation::READ,
            permission_type: permission::ALLOW,
        };
        assert_eq!(got, vec![want.clone(), want], "v{v}");
        truncations_fail(&body, |r| decode_create_acls(r, v).map(|_| ()));
    }
    for v in versions_of(DELETE_ACLS) {
        let body = enc(
            &km::DeleteAclsRequest::default().with_filters(vec![delete_filter(Some("a")), delete_filter(None)]),
            v,
        );
        let got = decode_delete_acls(&mut Reader::new(Bytes::from(body.clone())), v).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].resource_name.as_deref(), Some("a"));
        assert_eq!(got[1].resource_name, None);
        assert_eq!(got[1].principal.as_deref(), Some("User:t1"));
        assert_eq!(got[1].host.as_deref(), Some("*"));
        truncations_fail(&body, |r| decode_delete_acls(r, v).map(|_| ()));
    }
}

#[test]
fn acl_decoders_refuse_lying_counts() {
    for v in 1..=3 {
        let huge: &[u8] = if v >= 2 {
            &[0xff, 0xff, 0xff, 0xff, 0x0f]
        } else {
            &[0x7f, 0xff, 0xff, 0xff]
        };
        assert!(decode_create_acls(&mut Reader::new(Bytes::copy_from_slice(huge)), v).is_err());
        assert!(decode_delete_acls(&mut Reader::new(Bytes::copy_from_slice(huge)), v).is_err());
    }
    let mut rng = rand::rngs::SmallRng::seed_from_u64(29);
    for i in 0..5_000 {
        let v = 1 + (i % 3) as i16;
        let b: Vec<u8> = (0..rng.random_range(0..48)).map(|_| rng.random::<u8>()).collect();
        let _ = decode_describe_acls(&mut Reader::new(Bytes::from(b.clone())), v);
        let _ = decode_create_acls(&mut Reader::new(Bytes::from(b.clone())), v);
        let _ = decode_delete_acls(&mut Reader::new(Bytes::from(b)), v);
    }
}

fn token(id: &str, scopes: Vec<Scope>) -> TokenInfo {
    TokenInfo {
        id: id.into(),
        name: format!("{id}-name"),
        scopes,
        created_at: 0,
        expires_at: None,
        expired: false,
    }
}

fn tokens() -> Vec<TokenInfo> {
    vec![
        token(
            "t1",
            vec![Scope::new("orders", &[Op::Read]), Scope::new("logs.*", &[Op::Write])],
        ),
        token("t2", vec![Scope::everything()]),
        token("t3", vec![Scope::new("a?c", &[Op::Admin])]),
        TokenInfo {
            expired: true,
            ..token("old", vec![Scope::new("orders", &[Op::Read])])
        },
    ]
}

#[test]
fn token_scopes_become_acl_bindings() {
    assert_eq!(topic_pattern("orders"), (pattern::LITERAL, "orders".into()));
    assert_eq!(topic_pattern("*"), (pattern::LITERAL, "*".into()));
    assert_eq!(topic_pattern("logs.*"), (pattern::PREFIXED, "logs.".into()));
    assert_eq!(
        topic_pattern("a*b*"),
        (pattern::LITERAL, "a*b*".into()),
        "no Kafka equivalent"
    );
    let view = acl_view(&tokens());
    let of = |p: &str| -> Vec<(i8, String, i8, i8)> {
        view.iter()
            .filter(|b| b.principal == p)
            .map(|b| (b.resource_type, b.resource_name.clone(), b.pattern_type, b.operation))
            .collect()
    };
    use operation::*;
    use resource_type::{CLUSTER, GROUP, TOPIC};
    let (lit, pre) = (pattern::LITERAL, pattern::PREFIXED);
    assert_eq!(
        of("User:t1"),
        vec![
            (TOPIC, "orders".into(), lit, READ),
            (TOPIC, "orders".into(), lit, DESCRIBE),
            (TOPIC, "logs.".into(), pre, WRITE),
            (TOPIC, "logs.".into(), pre, DESCRIBE),
            (GROUP, "*".into(), lit, READ),
        ]
    );
    let t2 = of("User:t2");
    assert!(t2.contains(&(CLUSTER, CLUSTER_RESOURCE.into(), lit, ALL)));
    assert_eq!(
        t2.iter().filter(|b| b.0 == TOPIC).count(),
        8,
        "read, write, describe once, 5 admin ops"
    );
    assert!(
        !of("User:t3").iter().any(|b| b.0 == CLUSTER),
        "admin on a narrower glob"
    );
    assert!(of("User:old").is_empty(), "expired tokens grant nothing");
    assert!(view
        .iter()
        .all(|b| b.host == "*" && b.permission_type == permission::ALLOW));
}

#[test]
fn filters_match_as_kafkas_do() {
    let view = acl_view(&tokens());
    let count = |name: Option<&str>, pt: i8| {
        let f = AclFilter {
            resource_type: resource_type::TOPIC,
            resource_name: name.map(str::to_string),
            pattern_type: pt,
            principal: None,
            host: None,
            operation: operation::ANY,
            permission_type: permission::ANY,
        };
        view.iter().filter(|b| f.matches(b)).count()
    };
    // MATCH "logs.app": t1's prefix logs. (2) and t2's literal * (8).
    assert_eq!(count(Some("logs.app"), pattern::MATCH), 10);
    assert_eq!(count(Some("logs."), pattern::PREFIXED), 2);
    assert_eq!(count(Some("logs."), pattern::LITERAL), 0);
    assert_eq!(
        count(Some("orders"), pattern::ANY),
        2,
        "ANY: exact names of any pattern type"
    );
    assert_eq!(count(None, pattern::PREFIXED), 2);
    assert_eq!(count(None, pattern::ANY), 2 + 2 + 8 + 6);
}

#[tokio::test]
async fn with_auth_off_every_acl_api_answers_security_disabled_at_every_version() {
    let node = node().await;
    let s = node.services();
    for v in versions_of(DESCRIBE_ACLS) {
        let body = enc(&describe_req(None, pattern::ANY, None, operation::ANY), v);
        let r: km::DescribeAclsResponse = answer(&s, DESCRIBE_ACLS, v, &body).await;
        assert_eq!(r.error_code, acl_code::SECURITY_DISABLED);
        assert!(r.resources.is_empty());
    }
    for v in versions_of(CREATE_ACLS) {
        let body = enc(
            &km::CreateAclsRequest::default().with_creations(vec![creation(), creation()]),
            v,
        );
        let r: km::CreateAclsResponse = answer(&s, CREATE_ACLS, v, &body).await;
        assert_eq!(r.results.len(), 2);
        assert!(r.results.iter().all(|x| x.error_code == acl_code::SECURITY_DISABLED));
    }
    for v in versions_of(DELETE_ACLS) {
        let body = enc(
            &km::DeleteAclsRequest::default().with_filters(vec![delete_filter(None)]),
            v,
        );
        let r: km::DeleteAclsResponse = answer(&s, DELETE_ACLS, v, &body).await;
        assert_eq!(r.filter_results.len(), 1);
        assert_eq!(r.filter_results[0].error_code, acl_code::SECURITY_DISABLED);
    }
}

/// Auth on, with a fixed set of tokens.
struct Issued(Vec<TokenInfo>);

#[async_trait::async_trait]
impl Tokens for Issued {
    fn auth_required(&self) -> bool {
        true
    }
    fn authenticate(&self, _secret: &str) -> Result<Principal, AuthFailure> {
        Err(AuthFailure::Unknown)
    }
    fn scram_credential(
        &self,
        _user: &str,
        _mechanism: crate::auth::scram::Mechanism,
    ) -> Result<Option<crate::auth::scram::Credential>, AuthFailure> {
        Ok(None)
    }
    fn authenticate_id(&self, _id: &str) -> Result<Principal, AuthFailure> {
        Err(AuthFailure::Unknown)
    }
    fn scram_users(&self) -> ApiResult<Vec<crate::auth::scram::UserInfo>> {
        Ok(Vec::new())
    }
    async fn create_token(&self, _req: NewToken) -> ApiResult<IssuedToken> {
        Err(ApiError::new(ErrorCode::Forbidden, "fixed"))
    }
    fn list_tokens(&self) -> ApiResult<Vec<TokenInfo>> {
        Ok(self.0.clone())
    }
    async fn revoke_token(&self, _id: &str) -> ApiResult<()> {
        Err(ApiError::new(ErrorCode::Forbidden, "fixed"))
    }
}

#[tokio::test]
async fn with_auth_on_describe_lists_the_token_view_and_create_and_delete_are_refused() {
    let node = node().await;
    let mut s = node.services();
    s.tokens = Arc::new(Issued(tokens()));
    for v in versions_of(DESCRIBE_ACLS) {
        let req = describe_req(Some("logs.app"), pattern::MATCH, Some("User:t1"), operation::ANY)
            .with_resource_type_filter(resource_type::TOPIC);
        let body = enc(&req, v);
        let r: km::DescribeAclsResponse = answer(&s, DESCRIBE_ACLS, v, &body).await;
        assert_eq!(r.error_code, 0);
        assert_eq!(r.resources.len(), 1, "v{v}: {r:?}");
        let res = &r.resources[0];
        assert_eq!(
            (res.resource_type, res.resource_name.as_str(), res.pattern_type),
            (resource_type::TOPIC, "logs.", pattern::PREFIXED)
        );
        let ops: Vec<i8> = res.acls.iter().map(|a| a.operation).collect();
        assert_eq!(ops, vec![operation::WRITE, operation::DESCRIBE]);
        assert!(res
            .acls
            .iter()
            .all(|a| a.principal.as_str() == "User:t1" && a.host.as_str() == "*"));

        let body = enc(&km::CreateAclsRequest::default().with_creations(vec![creation()]), v);
        let r: km::CreateAclsResponse = answer(&s, CREATE_ACLS, v, &body).await;
        assert_eq!(r.results[0].error_code, acl_code::INVALID_REQUEST);
        assert!(r.results[0]
            .error_message
            .as_deref()
            .unwrap()
            .contains("POST /v1/tokens"));

        let body = enc(
            &km::DeleteAclsRequest::default()
                .with_filters(vec![delete_filter(Some("orders")), delete_filter(Some("none"))]),
            v,
        );
        let r: km::DeleteAclsResponse = answer(&s, DELETE_ACLS, v, &body).await;
        let codes: Vec<i16> = r.filter_results.iter().map(|f| f.error_code).collect();
        assert_eq!(
            codes,
            vec![acl_code::INVALID_REQUEST, 0],
            "a filter matching nothing deletes nothing"
        );
        assert!(r.filter_results.iter().all(|f| f.matching_acls.is_empty()));
    }
}

#[tokio::test]
async fn with_auth_on_a_token_without_cluster_admin_is_refused_by_every_acl_api() {
    let node = node().await;
    let mut s = node.services();
    s.tokens = Arc::new(Issued(tokens()));
    let principal = Principal {
        id: "t1".into(),
        scopes: vec![Scope::new("logs.*", &[Op::Read, Op::Write, Op::Admin])],
    };
    let s = crate::kafka::authz::scoped(&s, Arc::new(principal));
    for v in versions_of(DESCRIBE_ACLS) {
        let req = describe_req(None, pattern::ANY, None, operation::ANY).with_resource_type_filter(resource_type::ANY);
        let r: km::DescribeAclsResponse = answer(&s, DESCRIBE_ACLS, v, &enc(&req, v)).await;
        assert_eq!(r.error_code, acl_code::CLUSTER_AUTHORIZATION_FAILED, "v{v}");
        assert!(r.resources.is_empty());

        let body = enc(&km::CreateAclsRequest::default().with_creations(vec![creation()]), v);
        let r: km::CreateAclsResponse = answer(&s, CREATE_ACLS, v, &body).await;
        assert_eq!(r.results[0].error_code, acl_code::CLUSTER_AUTHORIZATION_FAILED, "v{v}");

        let body = enc(
            &km::DeleteAclsRequest::default().with_filters(vec![delete_filter(Some("none"))]),
            v,
        );
        let r: km::DeleteAclsResponse = answer(&s, DELETE_ACLS, v, &body).await;
        assert_eq!(
            r.filter_results[0].error_code,
            acl_code::CLUSTER_AUTHORIZATION_FAILED,
            "v{v}"
        );
    }
}
