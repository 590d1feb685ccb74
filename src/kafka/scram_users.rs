//! DescribeUserScramCredentials (v0): the SCRAM users, which are the
//! tokens with SCRAM verifiers (user name = token id), with each one's
//! mechanisms and iterations — never a salt or a key. Needs a cluster
//! admin (`CLUSTER_AUTHORIZATION_FAILED` otherwise, as Kafka answers
//! without DESCRIBE on the cluster). AlterUserScramCredentials is not
//! spoken: verifiers are made when a token is issued (docs/kafka.md).

use super::wire::{DecodeResult, Reader, Writer};
use crate::api::{ErrorCode, Tokens};
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::DescribeUserScramCredentialsResponse;
use kafka_protocol::protocol::StrBytes;

pub const DESCRIBE_USER_SCRAM_CREDENTIALS: i16 = 50;

const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const RESOURCE_NOT_FOUND: i16 = 91;
const DUPLICATE_RESOURCE: i16 = 92;

/// The users asked for; `None`: all of them.
pub fn decode_describe_user_scram_credentials(r: &mut Reader, _version: i16) -> DecodeResult<Option<Vec<String>>> {
    // Each user is at least a compact string length and a tagged-field count.
    let users = match r.compact_nullable_array_len(2)? {
        None => None,
        Some(n) => {
            let mut users = Vec::with_capacity(n);
            for _ in 0..n {
                users.push(r.compact_string()?);
                r.tagged_fields()?;
            }
            Some(users)
        }
    };
    r.tagged_fields()?;
    r.expect_end()?;
    Ok(users)
}

/// The answer to a describe of `users` (`None` or empty: every user).
pub fn describe_user_scram_credentials(
    tokens: &dyn Tokens,
    users: Option<Vec<String>>,
) -> DescribeUserScramCredentialsResponse {
    let known = match tokens.scram_users() {
        Ok(known) => known,
        Err(e) => {
            let code = if e.code == ErrorCode::Forbidden {
                CLUSTER_AUTHORIZATION_FAILED
            } else {
                super::error_code(&e)
            };
            return DescribeUserScramCredentialsResponse::default()
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_string(e.message)));
        }
    };
    let info = |u: &crate::auth::scram::UserInfo| {
        DescribeUserScramCredentialsResult::default()
            .with_user(StrBytes::from_string(u.user.clone()))
            .with_credential_infos(
                u.credentials
                    .iter()
                    .map(|(m, i)| {
                        CredentialInfo::default()
                            .with_mechanism(m.kafka_type())
                            .with_iterations(*i as i32)
                    })
                    .collect(),
            )
    };
    let results = match users.filter(|u| !u.is_empty()) {
        None => known.iter().map(info).collect(),
        Some(asked) => asked
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let result =
                    DescribeUserScramCredentialsResult::default().with_user(StrBytes::from_string(name.clone()));
                if asked[..i].contains(name) || asked[i + 1..].contains(name) {
                    result
                        .with_error_code(DUPLICATE_RESOURCE)
                        .with_error_message(Some(StrBytes::from_static_str(
                            "Cannot describe SCRAM credentials for the same user twice in a single request",
                        )))
                } else if let Some(u) = known.iter().find(|u| &u.user == name) {
                    info(u)
                } else {
                    result
                        .with_error_code(RESOURCE_NOT_FOUND)
                        .with_error_message(Some(StrBytes::from_static_str(
                            "Attempt to describe a user credential that does not exist",
                        )))
                }
            })
            .collect(),
    };
    DescribeUserScramCredentialsResponse::default().with_results(results)
}

/// Decode, answer and encode one DescribeUserScramCredentials request.
pub fn request(tokens: &dyn Tokens, version: i16, r: &mut Reader, w: &mut Writer) -> DecodeResult<()> {
    let users = decode_describe_user_scram_credentials(r, version)?;
    w.message(&describe_user_scram_credentials(tokens, users), version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
    use kafka_protocol::messages::DescribeUserScramCredentialsRequest;
    use kafka_protocol::protocol::{Decodable, Encodable};

    fn encoded(users: Option<&[&str]>) -> bytes::Bytes {
        let req = DescribeUserScramCredentialsRequest::default().with_users(users.map(|u| {
            u.iter()
                .map(|n| UserName::default().with_name(StrBytes::from_string(n.to_string())))
                .collect()
        }));
        let mut b = BytesMut::new();
        req.encode(&mut b, 0).unwrap();
        b.freeze()
    }

    #[test]
    fn requests_from_kafka_protocol_decode_at_every_version() {
        for users in [None, Some(&[][..]), Some(&["0123456789abcdef", "x"][..])] {
            let got = decode_describe_user_scram_credentials(&mut Reader::new(encoded(users)), 0).unwrap();
            assert_eq!(got, users.map(|u| u.iter().map(|s| s.to_string()).collect::<Vec<_>>()));
        }
    }

    #[test]
    fn truncated_and_lying_requests_fail_to_decode() {
        let full = encoded(Some(&["0123456789abcdef"]));
        for n in 0..full.len() {
            assert!(
                decode_describe_user_scram_credentials(&mut Reader::new(full.slice(..n)), 0).is_err(),
                "{n}"
            );
        }
        // A count of 2^31 users in a 6-byte body.
        let lying = bytes::Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x07, 0x00]);
        assert!(decode_describe_user_scram_credentials(&mut Reader::new(lying), 0).is_err());
    }

    #[test]
    fn responses_decode_with_kafka_protocol() {
        let resp = DescribeUserScramCredentialsResponse::default().with_results(vec![
            DescribeUserScramCredentialsResult::default()
                .with_user(StrBytes::from_static_str("0123456789abcdef"))
                .with_credential_infos(vec![CredentialInfo::default().with_mechanism(2).with_iterations(4096)]),
        ]);
        let mut w = Writer::default();
        w.message(&resp, 0).unwrap();
        let mut out = w.finish().into_bytes();
        assert_eq!(DescribeUserScramCredentialsResponse::decode(&mut out, 0).unwrap(), resp);
    }
}
