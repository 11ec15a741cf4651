//! The OAuth protected-resource metadata (RFC 9728), at `/.well-known/oauth-protected-resource`
//! and at its path-suffixed form for the MCP door (`…/mcp`), open to callers without a token
//! (they read it to find where to get one). Only translates: the document is
//! `api::oidc::metadata`'s. Without `[auth.oidc]` there is no authorization server to name:
//! 404.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::HttpState;
use super::error::ApiError;
use super::openapi::ErrorBody;
use crate::service::ErrorCode;

/// RFC 9728 §2's fields, as served.
#[derive(Serialize, ToSchema)]
pub struct ProtectedResourceBody {
    /// The resource tokens are minted for (the first issuer's `audience`).
    pub resource: String,
    /// Every configured issuer, exactly as configured.
    pub authorization_servers: Vec<String>,
    pub scopes_supported: Vec<String>,
    /// `header`: tokens travel in `Authorization: Bearer`.
    pub bearer_methods_supported: Vec<String>,
    pub resource_name: String,
}

/// The protected-resource metadata (RFC 9728).
#[utoipa::path(get, path = "/.well-known/oauth-protected-resource", tag = "ops",
    responses((status = 200, body = ProtectedResourceBody), (status = 404, body = ErrorBody)))]
pub async fn protected_resource(State(state): State<HttpState>) -> Result<Json<Value>, ApiError> {
    document(&state)
}

/// The same document at its path-suffixed form for `/mcp` (RFC 9728 §3.1).
#[utoipa::path(get, path = "/.well-known/oauth-protected-resource/mcp", tag = "ops",
    responses((status = 200, body = ProtectedResourceBody), (status = 404, body = ErrorBody)))]
pub async fn protected_resource_mcp(
    State(state): State<HttpState>,
) -> Result<Json<Value>, ApiError> {
    document(&state)
}

fn document(state: &HttpState) -> Result<Json<Value>, ApiError> {
    match &state.oidc {
        Some(verifier) => Ok(Json(verifier.metadata().document().clone())),
        None => Err(ApiError::new(
            ErrorCode::NotFound,
            "no authorization server is configured ([auth.oidc])",
        )),
    }
}
