//! [`Tokens`] for [`Node`]: secrets are checked against the view's token
//! records; issuing and revoking are proposed to the metadata log.

use super::super::Node;
use super::meta_error;
use crate::api::*;
use crate::meta::{Command, Outcome, Rejection};
use async_trait::async_trait;

#[async_trait]
impl Tokens for Node {
    fn auth_required(&self) -> bool {
        self.config.auth
    }

    fn authenticate(&self, secret: &str) -> Result<crate::auth::Principal, crate::auth::AuthFailure> {
        self.auth
            .authenticate(secret, |id| self.meta.view().tokens.get(id).cloned())
    }

    fn scram_credential(
        &self,
        user: &str,
        mechanism: crate::auth::scram::Mechanism,
    ) -> Result<Option<crate::auth::scram::Credential>, crate::auth::AuthFailure> {
        let record = self.meta.view().tokens.get(user).cloned();
        let credential = record.as_ref().and_then(|r| r.scram(mechanism).cloned());
        self.auth.admit(record)?;
        Ok(credential)
    }

    fn authenticate_id(&self, id: &str) -> Result<crate::auth::Principal, crate::auth::AuthFailure> {
        self.auth.admit(self.meta.view().tokens.get(id).cloned())
    }

    fn scram_users(&self) -> ApiResult<Vec<crate::auth::scram::UserInfo>> {
        Ok(self
            .meta
            .view()
            .tokens
            .values()
            .filter(|r| !r.scram.is_empty())
            .map(|r| crate::auth::scram::UserInfo {
                user: r.id.clone(),
                credentials: r.scram.iter().map(|c| (c.mechanism, c.iterations)).collect(),
            })
            .collect())
    }

    async fn create_token(&self, req: crate::auth::NewToken) -> ApiResult<crate::auth::IssuedToken> {
        self.check_serving()?;
        // With auth off every caller is anonymous: a token issued now would
        // be a credential nobody authorized, valid the day auth is turned on.
        if !self.config.auth {
            return Err(ApiError::new(
                ErrorCode::AuthOff,
                "tokens are issued only with --auth on (this node runs --auth off, where every request is allowed)",
            ));
        }
        let issuer = crate::api::caller_token()
            .and_then(|t| self.authenticate(t.expose()).ok())
            .ok_or_else(|| ApiError::new(ErrorCode::Unauthenticated, "issuing a token needs an admin token"))?;
        if !issuer.is_cluster_admin() {
            return Err(ApiError::new(
                ErrorCode::Forbidden,
                format!("token {} lacks admin on all topics (\"*\")", issuer.id),
            ));
        }
        let now = self.auth.now_ms();
        let expires_at = match req.expires_in_sec {
            None => None,
            Some(0) => return Err(ApiError::invalid("expires_in_sec must be at least 1")),
            Some(s) => Some(
                i64::try_from(s)
                    .ok()
                    .and_then(|s| s.checked_mul(1000))
                    .and_then(|ms| now.checked_add(ms))
                    .ok_or_else(|| ApiError::invalid(format!("expires_in_sec {s} is too large")))?,
            ),
        };
        let (secret, record) = crate::auth::token::issue(&req.name, req.scopes, now, expires_at, &issuer.id);
        record.validate().map_err(ApiError::invalid)?;
        self.check_meta_reachable()?;
        let id = record.id.clone();
        match self
            .meta
            .propose(Command::CreateToken { token: record })
            .await
            .map_err(meta_error)?
        {
            Outcome::Applied => {
                tracing::info!(token = %id, name = %req.name, "token issued");
                Ok(crate::auth::IssuedToken {
                    id,
                    token: secret,
                    expires_at,
                })
            }
            Outcome::Rejected(Rejection::Invalid(m)) => Err(ApiError::invalid(m)),
            Outcome::Rejected(r) => Err(ApiError::unavailable(format!("token not issued: {r}"))),
            other => Err(ApiError::new(
                ErrorCode::Internal,
                format!("unexpected outcome {other:?}"),
            )),
        }
    }

    fn list_tokens(&self) -> ApiResult<Vec<crate::auth::TokenInfo>> {
        let now = self.auth.now_ms();
        Ok(self
            .meta
            .view()
            .tokens
            .values()
            .map(|r| crate::auth::TokenInfo::of(r, now))
            .collect())
    }

    async fn revoke_token(&self, id: &str) -> ApiResult<()> {
        self.check_serving()?;
        if !self.meta.view().tokens.contains_key(id) {
            return Err(ApiError::new(ErrorCode::TokenNotFound, format!("no token {id:?}")));
        }
        self.check_meta_reachable()?;
        match self
            .meta
            .propose(Command::RevokeToken { id: id.to_string() })
            .await
            .map_err(meta_error)?
        {
            Outcome::Applied => {
                tracing::info!(token = %id, "token revoked");
                Ok(())
            }
            Outcome::Rejected(Rejection::TokenNotFound(_)) => {
                Err(ApiError::new(ErrorCode::TokenNotFound, format!("no token {id:?}")))
            }
            Outcome::Rejected(r) => Err(ApiError::unavailable(format!("token not revoked: {r}"))),
            other => Err(ApiError::new(
                ErrorCode::Internal,
                format!("unexpected outcome {other:?}"),
            )),
        }
    }
}
