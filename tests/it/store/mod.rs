//! The store conformance suite: every `Store` method, written once against `Arc<dyn Store>` as
//! functions taking a [`harness::Backend`], and instantiated by `conformance!` for each backend
//! (`on_sqlite::…`, `on_postgres::…`). Each test gets a fresh, empty store (Postgres: a schema
//! of its own). `sqlite` holds the tests about opening a SQLite file; `fleet` the Postgres-only
//! ones about several daemons on one database.

mod approvals;
mod audit_queries;
mod batches;
mod calls;
mod events;
mod fleet;
mod harness;
mod nodes;
mod restart;
mod results;
mod sessions;
mod snapshots;
mod sqlite;

/// One `#[tokio::test]` per listed function and backend. A Postgres test without a server
/// skips with a note outside CI (`harness::postgres_url` fails it in CI).
macro_rules! conformance {
    ($($module:ident: [$($test:ident),* $(,)?]),* $(,)?) => {
        mod on_sqlite {
            $(mod $module {
                $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    crate::store::$module::$test(crate::store::harness::Backend::Sqlite).await;
                })*
            })*
        }
        mod on_postgres {
            $(mod $module {
                $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    if crate::store::harness::postgres_url().is_some() {
                        crate::store::$module::$test(crate::store::harness::Backend::Postgres).await;
                    }
                })*
            })*
        }
    };
}

conformance! {
    audit_queries: [
        each_filter_and_their_combinations_select_exactly_their_rows,
        a_zero_limit_page_says_whether_rows_remain_and_continues_from_the_start,
        paging_newest_first_while_rows_are_inserted_skips_and_repeats_nothing,
        pruning_deletes_only_rows_older_than_the_cutoff_with_their_results,
    ],
    snapshots: [
        snapshots_are_recorded_sized_listed_and_deleted_once,
        a_sessions_layers_are_replaced_whole,
    ],
    approvals: [
        pending_approvals_are_the_sessions_unresolved_ones_oldest_first,
        an_approval_resolves_once_and_an_unknown_one_not_at_all,
        of_concurrent_resolutions_exactly_one_wins,
        a_decision_other_than_allow_or_deny_is_invalid,
        an_approval_for_an_unknown_session_is_not_found_and_a_duplicate_id_a_conflict,
    ],
    batches: [
        batches_without_a_key_are_always_new,
        a_claimed_batch_is_running_then_completed_with_its_results,
        the_same_key_and_hash_returns_the_existing_batch,
        the_same_key_with_another_hash_is_a_conflict,
        keys_are_per_session,
        concurrent_claims_with_one_key_give_exactly_one_new,
        another_sessions_or_an_unknown_batch_is_none,
        completing_an_unknown_batch_is_not_found,
        a_released_claim_frees_its_key_and_a_completed_batch_stays,
        claiming_for_an_unknown_session_is_not_found,
        a_duplicate_batch_id_is_a_conflict,
        a_stored_batch_of_an_unknown_format_is_an_error_naming_it,
    ],
    calls: [
        a_row_reads_back_with_every_field_and_the_node,
        a_thousand_concurrent_records_from_fifty_tasks_are_durable_and_listed_once,
        pages_follow_the_cursor_and_skip_other_sessions,
        a_zero_limit_gives_an_empty_page_that_says_whether_rows_remain,
        an_unknown_session_has_no_calls,
        odd_text_and_measured_durations_round_trip_exactly,
        a_burst_of_1500_simultaneous_records_is_stored_whole,
        a_batchs_rows_read_back_alone_in_order,
    ],
    events: [
        events_read_back_whole_in_seq_order,
        filters_combine_and_after_seq_and_limit_apply,
        the_store_filter_agrees_with_event_filter_matches,
        the_last_seq_is_zero_when_empty_then_the_highest,
        a_stored_seq_is_a_conflict_and_the_append_stores_nothing,
        pruning_deletes_events_older_than_the_cutoff,
        pruning_every_event_keeps_the_newest_so_seqs_go_on,
        pruning_more_than_a_statements_worth_deletes_every_old_event,
    ],
    restart: [
        reopening_the_database_keeps_everything,
    ],
    results: [
        a_result_reads_back_by_character_range,
        reads_spanning_chunk_boundaries_slice_by_characters,
        offset_past_the_end_and_zero_limit_give_empty_content,
        an_empty_output_has_no_characters,
        a_five_megabyte_result_reads_back_byte_for_byte_in_pages,
        another_sessions_result_is_unknown_to_it,
        an_unknown_result_is_an_error_naming_it,
        each_offload_gets_its_own_id,
        a_streamed_result_decodes_invalid_utf8_like_from_utf8_lossy_across_reads,
    ],
    sessions: [
        a_session_reads_back_as_inserted,
        an_unknown_session_is_none,
        a_duplicate_session_id_is_a_conflict_naming_it,
        saved_state_replaces_the_old_one,
        saving_the_state_of_an_unknown_session_is_not_found,
        listing_is_in_creation_order_and_hides_closed_sessions_unless_asked,
        closing_is_true_once_then_false_and_false_when_unknown,
    ],
    nodes: [
        a_heartbeat_records_the_node_and_refreshes_it,
        a_silent_node_is_claimed_once_until_it_beats_again,
        adoption_moves_an_open_session_once,
        queued_calls_without_an_audit_row_are_marked_interrupted_once,
        numbered_appends_continue_after_every_stored_seq,
    ],
}
