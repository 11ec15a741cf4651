//! Offloaded outputs as MCP resources (DESIGN §8): a call whose output was offloaded answers
//! with its preview text plus a `resource_link` to `toold://results/{result_id}`, which
//! `resources/read` pages through by character range (the template
//! `toold://results/{result_id}{?offset,limit}`), as `GET /v1/results/{id}` does.
//!
//! A page is capped at [`MAX_RESULT_PAGE`] characters: a `limit` above it is clamped, and the
//! answer says so in its `_meta` (`dev.toold/page`: the offset, the limit asked and the one
//! served, the total, where the next page starts), since a 2025-era answer is one SSE event
//! and the Python SDK refuses an event past 1 MiB.
//!
//! Only the URIs and the MCP shapes live here; reading is [`ToolService::read_result`].
//! Results are not listed (`resources/list` is empty): a client learns of one from its call.

use rmcp::model::{
    ContentBlock, ErrorData, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
};

use crate::permission::Principal;
use crate::service::ToolService;
use crate::tool::OffloadedResult;

const SCHEME_AND_HOST: &str = "toold://results/";

/// Characters a read returns when the URI gives no limit. Smaller than the HTTP door's 1 Mi:
/// a legacy-era answer is one SSE event, and the Python SDK (`mcp` 2.x) refuses an event past
/// 1 MiB by default (`max_sse_event_size`), so a page of 1 Mi characters, JSON-escaped, failed
/// there. 256 Ki characters stay under it for text of up to 3 bytes a character.
const DEFAULT_RESULT_PAGE: u64 = 256 << 10;
/// Characters a read returns at most, whatever the URI asks: the default page. A bigger page
/// would not reach a client that keeps the Python SDK's 1 MiB SSE event cap (the HTTP door's
/// `GET /v1/results/{id}` allows more; it is not one event).
const MAX_RESULT_PAGE: u64 = DEFAULT_RESULT_PAGE;

/// The `_meta` key of a page's bounds.
const PAGE_META: &str = "dev.toold/page";

/// The link a call's result carries to its offloaded output.
pub fn resource_link(offloaded: &OffloadedResult) -> ContentBlock {
    let resource = Resource::new(
        format!("{SCHEME_AND_HOST}{}", offloaded.result_id),
        offloaded.result_id.clone(),
    )
    .with_description(format!(
        "the full output ({} characters); page with ?offset=&limit=",
        offloaded.total_chars
    ))
    .with_mime_type("text/plain")
    .with_size(offloaded.total_chars);
    ContentBlock::resource_link(resource)
}

/// The same pointer as text, for revisions without `resource_link` (before 2025-06-18).
pub fn resource_pointer(offloaded: &OffloadedResult) -> String {
    format!(
        "[the full output ({} characters) is also the resource {SCHEME_AND_HOST}{}; \
         page it with resources/read and ?offset=&limit=]",
        offloaded.total_chars, offloaded.result_id
    )
}

/// The one resource template: an offloaded output, by character range.
pub fn template() -> ResourceTemplate {
    ResourceTemplate::new(
        format!("{SCHEME_AND_HOST}{{result_id}}{{?offset,limit}}"),
        "offloaded_output",
    )
    .with_description("an offloaded tool output, by character range (offset, limit)")
    .with_mime_type("text/plain")
}

/// Which characters of which result a `toold://results/...` URI asks for.
#[derive(Debug, PartialEq, Eq)]
struct ResultRange {
    result_id: String,
    offset: u64,
    limit: u64,
    /// The `limit` the URI asked for when it was above the cap (and clamped to it).
    clamped_from: Option<u64>,
}

impl ResultRange {
    fn parse(uri: &str) -> Result<ResultRange, ErrorData> {
        // `data.uri` names the resource, as SEP-2164 asks of a resource-not-found error.
        let unknown = || {
            ErrorData::resource_not_found(
                format!("unknown resource \"{uri}\""),
                Some(serde_json::json!({ "uri": uri })),
            )
        };
        let rest = uri.strip_prefix(SCHEME_AND_HOST).ok_or_else(unknown)?;
        let (result_id, query) = rest.split_once('?').unwrap_or((rest, ""));
        if result_id.is_empty() || result_id.contains('/') {
            return Err(unknown());
        }
        let mut range = ResultRange {
            result_id: result_id.to_owned(),
            offset: 0,
            limit: DEFAULT_RESULT_PAGE,
            clamped_from: None,
        };
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let number = || {
                value.parse::<u64>().map_err(|_| {
                    ErrorData::invalid_params(format!("{key} must be a number in \"{uri}\""), None)
                })
            };
            match key {
                "offset" => range.offset = number()?,
                "limit" => {
                    let asked = number()?;
                    range.limit = asked.min(MAX_RESULT_PAGE);
                    range.clamped_from = (asked > MAX_RESULT_PAGE).then_some(asked);
                }
                _ => {
                    return Err(ErrorData::invalid_params(
                        format!("unknown parameter \"{key}\" in \"{uri}\"; expected offset, limit"),
                        None,
                    ));
                }
            }
        }
        Ok(range)
    }
}

/// `resources/read` of `uri`: a page of an offloaded output, or not found.
pub async fn read(
    service: &ToolService,
    caller: &Principal,
    uri: &str,
) -> Result<ReadResourceResult, ErrorData> {
    let range = ResultRange::parse(uri)?;
    let page = service
        .read_result(caller, &range.result_id, range.offset, range.limit)
        .await
        .map_err(|err| {
            ErrorData::resource_not_found(err.message, Some(serde_json::json!({ "uri": uri })))
        })?;
    let served = page.content.chars().count() as u64;
    let next = page.offset + served;
    let mut bounds = serde_json::json!({
        "offset": page.offset,
        "limit": range.limit,
        "total_chars": page.total_chars,
        "next_offset": (next < page.total_chars).then_some(next),
    });
    if let Some(asked) = range.clamped_from {
        bounds["clamped"] = true.into();
        bounds["limit_asked"] = asked.into();
        bounds["note"] = format!(
            "limit {asked} is above the page cap of {MAX_RESULT_PAGE} characters; \
             {served} characters served, read on from offset {next}"
        )
        .into();
    }
    let mut meta = serde_json::Map::new();
    meta.insert(PAGE_META.to_owned(), bounds);
    let mut answer = ReadResourceResult::new(vec![ResourceContents::text(page.content, uri)]);
    answer.meta = Some(rmcp::model::MetaObject(meta));
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_name_a_result_and_a_range() {
        let parse = |uri| ResultRange::parse(uri);
        assert_eq!(
            parse("toold://results/res_1").unwrap(),
            ResultRange {
                result_id: "res_1".into(),
                offset: 0,
                limit: DEFAULT_RESULT_PAGE,
                clamped_from: None,
            }
        );
        let ranged = parse("toold://results/res_1?offset=10&limit=5").unwrap();
        assert_eq!((ranged.offset, ranged.limit), (10, 5));
        let capped = parse("toold://results/res_1?limit=999999999999").unwrap();
        assert_eq!(capped.limit, MAX_RESULT_PAGE);
        assert_eq!(capped.clamped_from, Some(999999999999));
        assert_eq!(
            parse("toold://results/res_1?limit=5").unwrap().clamped_from,
            None
        );
        for bad in [
            "file:///etc/passwd",
            "toold://results/",
            "toold://results/a/b",
            "toold://results/res_1?offset=x",
            "toold://results/res_1?page=2",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_template_and_the_links_share_the_scheme() {
        assert_eq!(
            template().uri_template,
            "toold://results/{result_id}{?offset,limit}"
        );
        let offloaded = OffloadedResult {
            result_id: "res_9".into(),
            total_chars: 42,
        };
        let ContentBlock::ResourceLink(link) = resource_link(&offloaded) else {
            panic!("not a resource link");
        };
        assert_eq!(link.uri, "toold://results/res_9");
        assert_eq!(link.size, Some(42));
    }
}
