/*
 * test_meta_marks.c: unit test of the meta protocol's marker table
 * (server/meta_marks.c): markers belong to one version of a key (its cas);
 * a caller asking about an older version (it looked the item up before md I
 * gave it a new cas) neither reads, removes nor overwrites the newer
 * version's markers, while an older version's markers go when a newer cas
 * is asked about; exactly one caller takes the win token; the carry of an
 * in-place rewrite moves markers only from the version it names. TAP.
 */
#include <stdio.h>

#include "meta_marks.h"
#include "t/rdma/tap.h"

int main(void)
{
    meta_marks_set("k", 1, 10, MARK_STALE);
    tap_ok(meta_marks_get("k", 1, 10) == MARK_STALE, "markers of (k, 10) read back");
    tap_ok(meta_marks_get("k", 1, 9) == 0 && meta_marks_get("k", 1, 10) == MARK_STALE,
           "asking about an older cas reads nothing and removes nothing");
    tap_ok(meta_marks_take_token("k", 1, 9) == 0 && meta_marks_get("k", 1, 10) == MARK_STALE,
           "taking the token of an older cas leaves the newer markers as they are");
    meta_marks_set("k", 1, 9, MARK_TOKEN_SENT);
    tap_ok(meta_marks_get("k", 1, 10) == MARK_STALE,
           "setting an older cas's markers changes nothing");
    tap_ok(meta_marks_take_token("k", 1, 10) == MARK_STALE &&
               meta_marks_take_token("k", 1, 10) == (MARK_STALE | MARK_TOKEN_SENT),
           "one caller takes the win token; the next sees it taken");
    tap_ok(meta_marks_get("k", 1, 11) == 0 && meta_marks_get("k", 1, 10) == 0,
           "a newer cas asked about: the old version's markers go");

    meta_marks_set("n", 1, 20, MARK_STALE | MARK_TOKEN_SENT);
    meta_marks_carry("n", 1, 19, 21);
    tap_ok(meta_marks_get("n", 1, 20) == (MARK_STALE | MARK_TOKEN_SENT),
           "a carry from another version moves nothing");
    meta_marks_carry("n", 1, 20, 21);
    tap_ok(meta_marks_get("n", 1, 21) == (MARK_STALE | MARK_TOKEN_SENT),
           "a carry from the marked version moves its markers to the new cas");
    meta_marks_make_stale("n", 1, 21, 22);
    tap_ok(meta_marks_get("n", 1, 22) == MARK_STALE, "md I: stale, win token not yet sent");
    meta_marks_free();
    tap_ok(!meta_marks_any(), "freed: no markers left");
    tap_no_plan_end();
    return tap_exit_status();
}
