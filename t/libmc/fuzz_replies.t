#!/bin/sh
# t/libmc/fuzz_replies.t: damaged and random server replies (fake server,
# t/libmc/fuzz_replies.c); does not need $MC_SERVER.
exec "${top_builddir:?}/t/libmc/fuzz_replies"
