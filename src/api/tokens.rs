//! The tokens capability: whether callers must authenticate, who a secret
//! belongs to, and issuing, listing and revoking tokens.

use super::ApiResult;
use crate::auth::scram::{Credential, Mechanism};
use crate::auth::{AuthFailure, IssuedToken, NewToken, Principal, TokenInfo};
use async_trait::async_trait;

#[async_trait]
pub trait Tokens: Send + Sync + 'static {
    /// Whether callers must authenticate (`--auth on`). With `--auth off`
    /// every caller may do everything.
    fn auth_required(&self) -> bool;

    /// Who presented `secret`, checked against this node's applied view.
    fn authenticate(&self, secret: &str) -> Result<Principal, AuthFailure>;

    /// The SCRAM verifier of `user` (a token id) for `mechanism`: `Err` if
    /// no valid token has that id, `Ok(None)` if the token has no
    /// credential for it (issued before Sluice spoke SCRAM).
    fn scram_credential(&self, user: &str, mechanism: Mechanism) -> Result<Option<Credential>, AuthFailure>;

    /// Who the token with this id is now, without its secret: how a SCRAM
    /// login (which proved the secret) is checked again on each request.
    fn authenticate_id(&self, id: &str) -> Result<Principal, AuthFailure>;

    /// Every unrevoked token with SCRAM verifiers, by id (no keys, no salts).
    fn scram_users(&self) -> ApiResult<Vec<crate::auth::scram::UserInfo>>;

    /// Issue a token; the answer holds its secret, shown this once.
    async fn create_token(&self, req: NewToken) -> ApiResult<IssuedToken>;

    /// Every unrevoked token, without secrets (`forbidden` for a caller
    /// who may not see them).
    fn list_tokens(&self) -> ApiResult<Vec<TokenInfo>>;

    /// Revoke a token (`token_not_found` if there is none with that id).
    async fn revoke_token(&self, id: &str) -> ApiResult<()>;
}
