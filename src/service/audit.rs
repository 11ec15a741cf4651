//! The audit log across sessions, as every door reads it: a page of a [`CallQuery`]
//! ([`ToolService::query_calls`]) and an export streaming every row a filter selects
//! ([`ToolService::export_calls`]), both narrowed to what the caller may see (DESIGN §10).
//!
//! Who sees what: an admin and an observer every row; an agent the rows of its own sessions
//! (another's are absent, not an error: the filter gains `session_principal`); a principal
//! scoped to a session that session's alone. Naming a session explicitly (`session=`) keeps
//! what the per-session listing always did: a session the caller may not see, or that does
//! not exist, is `not_found`.
//!
//! An export is the listing's pages read one after the other, newest first, [`EXPORT_PAGE`]
//! rows at a time (one page read ahead of the door), so it never holds more than a few pages
//! and sees exactly the rows the listing would (rows inserted while it runs come after its first page's top and are not part of
//! it). Deliberately absent: the wire formats (NDJSON, CSV) — those are the doors'.

use std::sync::Arc;

use futures::Stream;

use super::access::{Access, in_scope, unknown_session};
use super::{Closed, ServiceError, ToolService};
use crate::permission::{Principal, Role};
use crate::store::{CallFilter, CallOrder, CallPage, CallQuery, CallRow, MAX_CALL_PAGE};

/// One row of an export.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportedCall {
    pub row: CallRow,
    /// The call's offloaded output, when asked for and kept (a result deleted since reads
    /// as none).
    pub output: Option<String>,
}

/// Rows an export reads per store query.
pub const EXPORT_PAGE: u32 = MAX_CALL_PAGE;

/// Pages an export reads ahead of what its door has taken.
const PAGES_AHEAD: usize = 1;

impl ToolService {
    /// A page of the audit log across sessions, narrowed to what `caller` may see.
    pub async fn query_calls(
        &self,
        caller: &Principal,
        query: CallQuery,
    ) -> Result<CallPage, ServiceError> {
        let query = self.visible(caller, query).await?;
        Ok(self.store.query_calls(&query).await?)
    }

    /// Every row `filter` selects that `caller` may see, newest first, a page at a time
    /// from the store (one item a page, so that a door encodes a page into one chunk), each
    /// row with its offloaded output when `with_output` (the store keeps no other output: a
    /// call's inline result went to its client). Who may see what is checked before the
    /// first row (an error then comes back here, before anything is sent).
    pub async fn export_calls(
        &self,
        caller: &Principal,
        filter: CallFilter,
        with_output: bool,
    ) -> Result<
        impl Stream<Item = Result<Vec<ExportedCall>, ServiceError>> + Send + 'static,
        ServiceError,
    > {
        let query = self
            .visible(
                caller,
                CallQuery {
                    filter,
                    order: CallOrder::NewestFirst,
                    after: None,
                    limit: EXPORT_PAGE,
                },
            )
            .await?;
        // The pages are read by a task of their own, one page ahead of the door: while the
        // door encodes and sends a page, the next one is read and decoded (on two cores the
        // two overlap). It stops when the door stops asking (the client went away).
        let (pages, receiver) = tokio::sync::mpsc::channel(PAGES_AHEAD);
        let store = Arc::clone(&self.store);
        tokio::spawn(async move {
            let mut query = Some(query);
            while let Some(current) = query.take() {
                let page = match store.query_calls(&current).await {
                    Ok(page) => page,
                    Err(err) => {
                        let _ = pages.send(Err(err.into())).await;
                        return;
                    }
                };
                query = page.next_cursor.map(|cursor| CallQuery {
                    after: Some(cursor),
                    ..current
                });
                let mut exported = Vec::with_capacity(page.rows.len());
                for row in page.rows {
                    let output = match (&row.record.offloaded, with_output) {
                        (Some(offloaded), true) => store
                            .read(&offloaded.result_id, 0, offloaded.total_chars)
                            .await
                            .ok()
                            .map(|page| page.content),
                        _ => None,
                    };
                    exported.push(ExportedCall { row, output });
                }
                if pages.send(Ok(exported)).await.is_err() {
                    return;
                }
            }
        });
        Ok(tokio_stream::wrappers::ReceiverStream::new(receiver))
    }

    /// `query` narrowed to the rows `caller` may see; `not_found` for a named session it
    /// may not see or that does not exist.
    async fn visible(
        &self,
        caller: &Principal,
        mut query: CallQuery,
    ) -> Result<CallQuery, ServiceError> {
        if let Some(scope) = caller.session_scope.as_deref()
            && query.filter.session_id.is_none()
        {
            query.filter.session_id = Some(scope.to_owned());
        }
        if let Some(session_id) = query.filter.session_id.as_deref() {
            if !in_scope(caller, session_id) {
                return Err(unknown_session(session_id));
            }
            self.authorize(caller, session_id, Access::Read).await?;
            self.ensure_session_known(session_id, Closed::Readable)
                .await?;
        } else if caller.role == Role::Agent {
            query.filter.session_principal = Some(caller.name.to_string());
        }
        Ok(query)
    }
}
